"""Logs (9): the project's log files with a level filter, search and follow; Compare: two runs of a pipeline side
by side (from Runs: space marks, c compares); search in a run's log (Run detail). Pilot tests on the seeded sample
with a spark.log written in log4j's format, and snapshots at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from ratui.console.format import fmt_ms
from ratui.engine.events import LogLine, RunQueued, RunStarted
from ratui.screens.compare import CompareScreen
from ratui.screens.logs import SparkLogScreen
from ratui.screens.run import RunScreen
from ratui.screens.runs import RunsScreen
from ratui.widgets.log_view import LogView

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .seed import PLAN, SUCCESS_RUN, _phases, seed_history
from .test_live_events import emit_in_thread


def spark_log() -> str:
    """A spark.log as log4j writes it with ratui's pattern (`%d{yyyy-MM-dd HH:mm:ss.SSS} %p %c{1}: %m%n`): ratui's
    INFO line, an ERROR with its stack trace, many WARNs, a second ERROR, a DEBUG line."""
    lines = ["2026-03-01 09:59:58 INFO ratui.spark: Spark local[*]: 2 cores",
             "2026-03-01 10:00:01.100 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
             "2026-03-01 10:00:02.412 ERROR Executor: Exception in task 0.0 in stage 458.0 (TID 503)",
             "org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT] The value 'placed' cannot be cast "
             "to \"INT\".",
             "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.invalidInputInCastToNumberError(Errors.scala:132)",
             "\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:593)",
             "\t... 21 more"]
    for n in range(60):
        lines.append(f"2026-03-01 10:01:{n:02d}.000 WARN FairSchedulableBuilder: A job was submitted with scheduler "
                     f"pool run-{n:04d}, which has not been configured.")
    lines += ["2026-03-01 10:02:00.001 ERROR TaskSetManager: Task 0 in stage 459.0 failed 1 times; aborting job",
              "2026-03-01 10:02:00.500 DEBUG Utils: shutdown hook called"]
    return "\n".join(lines) + "\n"


def write_logs(root) -> None:
    logs = root / ".ratui" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "spark.log").write_text(spark_log())
    (logs / "console.log").write_text("2026-03-01 10:03:00,000 WARNING ratui.console: Spark pre-warm failed: "
                                      "no Java\n")


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    root = copy_sample(tmp_path_factory.mktemp("logged"))
    seed_history(root)
    write_logs(root)
    return root


def view_rows(app) -> list[str]:
    """The rows the log view shows now, as text."""
    view = app.screen.query_one(LogView)
    top = int(view.scroll_y)
    out = []
    for entry, line, start, end in view.rows[top:top + view.scrollable_content_region.height]:
        out.append(view.model.entries[entry].lines[line][start:end])
    return out


def shown_lines(app) -> list[str]:
    """Every line the view would show (scrolling), for what the filter keeps."""
    view = app.screen.query_one(LogView)
    return [line for index in view.entries_shown for line in view.model.entries[index].lines]


def test_logs_level_filter_and_search(logged):
    app = make_app(logged)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("9")
            await settle(pilot)
            assert isinstance(app.screen, SparkLogScreen)
            text = flat(screen_text(app))
            assert "spark.log" in text and "other files: console.log" in text
            assert "ERROR 2 WARN 61 INFO 1 DEBUG 1" in text  # counts per level, as written
            # read from the end: the newest entry is on screen
            assert any("shutdown hook called" in row for row in view_rows(app))

            await pilot.press("l")  # ERROR only: warnings, info and debug go; a stack trace stays with its entry
            await settle(pilot)
            lines = shown_lines(app)
            assert "level ERROR only" in flat(screen_text(app))
            assert not any(" WARN " in line or " INFO " in line or " DEBUG " in line for line in lines)
            assert "    at org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:593)" in lines
            assert len([line for line in lines if " ERROR " in line]) == 2
            await pilot.press("l")  # WARN and above
            await settle(pilot)
            lines = shown_lines(app)
            assert any(" WARN " in line for line in lines) and not any(" INFO " in line for line in lines)
            await pilot.press("l", "l")  # INFO, then everything again
            await settle(pilot)
            assert any("DEBUG" in line for line in shown_lines(app))

            # search from the top: the first match lit, n goes to the next and scrolls it into view
            await pilot.press("g", "slash", *"IN STAGE", "enter")
            await settle(pilot)
            view = app.screen.query_one(LogView)
            assert "/IN STAGE 1/2 matches" in flat(screen_text(app))
            first = view.current
            assert "stage 458.0" in view.model.entries[first.entry].lines[first.line]
            await pilot.press("n")
            await settle(pilot)
            second = view.current
            assert "2/2 matches" in flat(screen_text(app))
            assert "stage 459.0" in view.model.entries[second.entry].lines[second.line]
            row = view.row_of(second.entry, second.line, second.start)
            assert view.scroll_y <= row < view.scroll_y + view.scrollable_content_region.height
            assert any("stage 459.0" in r for r in view_rows(app))
            await pilot.press("n")  # wraps to the first
            await settle(pilot)
            assert view.current == first and "1/2 matches" in flat(screen_text(app))
            await pilot.press("N")
            await settle(pilot)
            assert view.current == second

            await pilot.press("escape")  # clears the search
            await settle(pilot)
            assert "matches" not in flat(screen_text(app)) and view.current is None

            await pilot.press("tab")  # the next file
            await settle(pilot)
            text = flat(screen_text(app))
            assert "Spark pre-warm failed: no Java" in text and "WARN 1" in text
            assert not app.crashes

    run(go())


def test_logs_follow_shows_appended_lines_and_a_missing_log_says_when_it_appears(tmp_path):
    root = copy_sample(tmp_path)
    seed_history(root)
    app = make_app(root)
    log = root / ".ratui" / "logs" / "spark.log"

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("9")
            await settle(pilot)
            assert "Spark has not started in this project yet" in flat(screen_text(app))
            await pilot.press("f")
            await settle(pilot)
            assert "following (f)" in flat(screen_text(app))

            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(spark_log())
            await wait_for(pilot, lambda: "shutdown hook called" in flat(screen_text(app)), 10)

            with log.open("a") as fh:
                fh.write("2026-03-01 10:05:00.000 ERROR DAGScheduler: a brand new failure\n"
                         "\tat org.apache.spark.scheduler.DAGScheduler.run(DAGScheduler.scala:1)\n")
            await wait_for(pilot, lambda: "a brand new failure" in flat(screen_text(app)), 10)
            text = flat(screen_text(app))
            assert "DAGScheduler.run(DAGScheduler.scala:1)" in text  # at the end, in view
            assert "ERROR 3" in text

            log.write_text("2026-03-01 11:00:00.000 WARN Foo: after a truncation\n")  # truncated in place
            await wait_for(pilot, lambda: "after a truncation" in flat(screen_text(app)), 10)
            assert "a brand new failure" not in flat(screen_text(app))
            assert any("was truncated" in n for n in app.notices)

            await pilot.press("f")  # not following: the file grows unseen
            await settle(pilot)
            with log.open("a") as fh:
                fh.write("2026-03-01 11:00:01.000 WARN Foo: not followed\n")
            assert not app.screen.following
            app.screen._poll()  # what the follow timer does each second: it reads nothing while not following
            await settle(pilot)
            assert "not followed" not in flat(screen_text(app))
            assert not app.crashes

    run(go())


def test_compare_the_run_under_the_cursor_with_the_one_before(logged):
    app = make_app(logged)
    older_ms = PLAN["bronze.raw_customers"][1][-1][1]  # the run of raw_customers before SUCCESS_RUN
    older, newer = _phases("success", older_ms), _phases("success", 4321)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("2")
            await settle(pilot)
            screen = app.screen
            screen.table.move_cursor(row=screen.table.get_row_index(SUCCESS_RUN))
            await pilot.press("c")
            await settle(pilot)
            assert isinstance(app.screen, CompareScreen)
            text = screen_text(app)
            assert f"B {SUCCESS_RUN}" in text and "Compare bronze.raw_customers" in text
            for name, title in (("build", "2 build"), ("write", "3 write"), ("quality", "4 quality")):
                a, b = older[name], newer[name]
                assert f"{title} {fmt_ms(a)} {fmt_ms(b)}" in flat(text), name
            assert "unique_customer_id [warn] - warned (2) new" in flat(text)
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, RunsScreen)
            assert not app.crashes

    run(go())


def test_marked_runs_compare_and_two_pipelines_are_refused(logged):
    app = make_app(logged)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("2")
            await settle(pilot)
            screen = app.screen
            rows = {r["id"]: r for r in screen.data.rows}
            customers = [r for r in screen.data.rows if r["pipeline"] == "ecommerce.bronze.raw_customers"]
            other = next(r for r in screen.data.rows if r["pipeline"] != "ecommerce.bronze.raw_customers")

            async def mark(run_id):
                screen.table.move_cursor(row=screen.table.get_row_index(run_id))
                await pilot.press("space")
                await settle(pilot)

            await mark(customers[0]["id"])
            await mark(other["id"])
            assert f"marked: {customers[0]['id']} · {other['id']}" in screen_text(app)
            await pilot.press("c")
            await settle(pilot)
            assert isinstance(app.screen, RunsScreen)
            assert any("compare two runs of one pipeline" in n for n in app.notices)

            await mark(other["id"])  # unmarked again
            oldest = customers[-1]["id"]
            await mark(oldest)
            await pilot.press("c")
            await settle(pilot)
            assert isinstance(app.screen, CompareScreen)
            text = screen_text(app)
            assert f"A {oldest}" in text and f"B {customers[0]['id']}" in text  # the older one is A
            a_ms, b_ms = rows[oldest]["duration_ms"], rows[customers[0]["id"]]["duration_ms"]
            assert f"duration {fmt_ms(a_ms)} {fmt_ms(b_ms)}" in flat(text)
            assert not app.crashes

    run(go())


def test_run_log_search_lights_matches_and_keeps_live_lines_coming(seeded):
    app = make_app(seeded)
    rid, key = "260301120000f00d02", "ecommerce.gold.product_funnel"

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            app.open_run(SUCCESS_RUN)
            await settle(pilot)
            await pilot.press("slash", *"Main", "enter")
            await settle(pilot)
            text = flat(screen_text(app))
            assert "/Main 1/2 matches" in text
            screen = app.screen
            assert screen.matches[screen.current][0] == 0  # "branch ... created from main": the first entry
            await pilot.press("n")
            await settle(pilot)
            assert "2/2 matches" in flat(screen_text(app))
            assert screen.run.logs[screen.matches[screen.current][0]].message.startswith("merged run-")
            await pilot.press("escape")  # clears the search; a second escape goes back
            await settle(pilot)
            assert "matches" not in flat(screen_text(app)) and isinstance(app.screen, RunScreen)
            await pilot.press("escape")
            await settle(pilot)

            # a live run: the search counts lines that arrive after it, and the log stays at the match
            bus = app.controller.engine._bus
            emit_in_thread(bus, [RunQueued(rid, key, "console"), RunStarted(rid, key, f"run-{rid}"),
                                 *[LogLine(rid, "info", f"progress line {i}") for i in range(80)]])
            await settle(pilot)
            app.open_run(rid)
            await settle(pilot)
            await pilot.press("slash", *"line 3", "enter")
            await settle(pilot)
            screen = app.screen
            assert "1/11 matches" in flat(screen_text(app))  # line 3, 30..39
            log = screen.query_one("#run-log")
            assert "progress line 3" in flat(screen_text(app))
            emit_in_thread(bus, [LogLine(rid, "info", f"progress line {i}") for i in range(80, 320)])
            await settle(pilot)
            assert "1/31 matches" in flat(screen_text(app))  # and lines 300..319
            assert log.scroll_y < log.max_scroll_y  # still at the match, not pulled to the end
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------------------ snapshots


def snap(snap_compare, app, *steps, size):
    from .test_snapshots import snap as take

    return take(snap_compare, app, *steps, size=size)


def test_logs_snapshot(snap_compare, logged):
    """From the top, searched: the first match lit, an ERROR with its stack trace, the counts per level."""
    assert snap(snap_compare, make_app(logged), ("9",), ("g", "slash", *"stage", "enter"), size=(120, 40))


def test_logs_snapshot_80x24(snap_compare, logged):
    """The end of the log (where it opens), long lines wrapped under themselves."""
    assert snap(snap_compare, make_app(logged), ("9",), size=(80, 24))


def test_compare_snapshot(snap_compare, logged):
    """The second run in the list (SUCCESS_RUN) against the run of its pipeline before it."""
    assert snap(snap_compare, make_app(logged), ("2",), ("down", "c"), size=(120, 40))


def test_compare_snapshot_80x24(snap_compare, logged):
    assert snap(snap_compare, make_app(logged), ("2",), ("down", "c"), size=(80, 24))
