"""Pilot tests: drive each screen with keys and check what it shows. No Spark needed (history is seeded)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from ratui.console import user_settings
from ratui.console.controller import utc_now
from ratui.screens.dialogs import ConfirmScreen, ErrorScreen, HelpScreen, JumpScreen, MergeScreen
from ratui.screens.quality import QualityScreen
from ratui.screens.run import RunScreen
from ratui.engine.run.record import RunRecord

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .seed import FAILED_RUN, SUCCESS_RUN, seed_history

SIZE = (130, 42)


def test_pipelines_tree_and_detail(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            text = screen_text(app)
            # the tree: namespace > layer > pipeline with last status, last duration, strategy, sparkline
            assert "▼ ecommerce" in text and "bronze (4)" in text and "silver (3)" in text and "gold (4)" in text
            assert "✔ raw_customers" in text and "4.32s" in text and "full_refresh" in text
            assert "✘ clean_orders" in text and "8.77s" in text
            assert "■ clean_customers" in text
            assert "· customer_lifetime_value" in text  # never run
            assert "█▇██" in text  # raw_customers' recent durations
            # the detail of the first pipeline: description, last run, config, lineage, tests, SQL
            assert "ecommerce.bronze.raw_customers" in text
            assert "Customer master file as delivered" in text
            assert f"run {SUCCESS_RUN}" in flat(text)
            assert "merge_strategy" in text and "annotation" in text
            assert "downstream  silver.clean_customers" in text
            assert "unique_customer_id" in text
            assert "landing_zone('customers')" in text

            # move to clean_orders: its own detail follows the cursor
            for _ in range(6):  # past bronze's four and the silver node
                await pilot.press("down")
            await settle(pilot)
            assert app.screen.selected == ("pipeline", "ecommerce.silver.clean_orders")
            text = screen_text(app)
            assert "Quality tests (5)" in text
            assert "upstream    bronze.raw_orders" in text
            assert "watermark_column" in text and "updated_at" in text
            assert "✘ failed" in text

            # enter opens its latest run; q that run's quality; esc back twice
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == FAILED_RUN
            text = screen_text(app)
            assert "error[RAT-RUN-003]" in text and "quality gate failed" in text
            assert "✘ failed positive_amounts error 3" in flat(text)  # its quality row: failed, 3 violating rows
            await pilot.press("q")
            await settle(pilot)
            assert isinstance(app.screen, QualityScreen) and app.screen.run_id == FAILED_RUN
            await pilot.press("escape", "escape")
            await settle(pilot)
            assert app.screen.MODE == "pipelines"

            # a layer node summarises its pipelines
            await pilot.press("up", "up")  # -> silver (3)
            await settle(pilot)
            assert app.screen.selected == ("layer", "ecommerce", "silver")
            assert "ecommerce.silver — 3 pipeline(s)" in screen_text(app)
            assert not app.crashes

    run(go())


def test_bad_project_input_is_shown_inline_and_the_rest_stays_usable(broken):
    app = make_app(broken)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "⚠ 1 project problem(s)" in text
            assert "RAT-PRJ-002" in text
            assert "✘ product_catalog" in text and "RAT-CFG-001" in text
            assert "✘ daily_revenue" in text and "RAT-TPL-001" in text
            assert "✘ clean_customers" in text and "RAT-DAG-001" in text
            assert "✔ raw_customers" not in text  # never run, but fine:
            assert "· raw_customers" in text

            tree = app.screen.query_one("#pipeline-tree")
            tree.move_cursor(app.screen.nodes["ecommerce.silver.product_catalog"])
            await settle(pilot)
            text = flat(screen_text(app))
            assert "error[RAT-CFG-001]" in text
            assert "unknown merge strategy 'full_refresch'" in text
            assert "ecommerce/pipelines/silver/product_catalog/pipeline.sql:1" in text
            assert "hint:" in text

            # running a broken pipeline is refused with its code; nothing starts
            await pilot.press("r")
            await settle(pilot)
            assert not isinstance(app.screen, RunScreen)
            assert any("RAT-CFG-001" in n for n in app.notices)
            assert app.store.runs == {}

            # the template error names its line
            tree.move_cursor(app.screen.nodes["ecommerce.gold.daily_revenue"])
            await settle(pilot)
            assert "error[RAT-TPL-001]" in flat(screen_text(app))
            assert "daily_revenue/pipeline.sql:" in flat(screen_text(app))

            # the healthy ones are untouched
            tree.move_cursor(app.screen.nodes["ecommerce.bronze.raw_orders"])
            await settle(pilot)
            text = screen_text(app)
            assert "error[" not in text
            assert "Quality tests (3)" in text
            assert not app.crashes

    run(go())


def test_run_all_on_a_broken_project_runs_nothing_and_says_why(broken):
    """As `ratui run` without a selector: any compile error in the project stops the whole batch."""
    app = make_app(broken)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("a")
            await settle(pilot)
            assert not isinstance(app.screen, RunScreen)
            assert app.store.runs == {}
            notice = next(n for n in app.notices if "nothing was run" in n)
            problems = len(app.compiled.all_errors())
            assert f"{problems} problem(s) in the project" in notice and "RAT-" in notice
            assert not app.crashes

    run(go())


@pytest.fixture(scope="module")
def paged(tmp_path_factory):
    root = copy_sample(tmp_path_factory.mktemp("paged"))
    seed_history(root, bulk=250)
    return root


def test_runs_pages_filters_and_opens(paged):
    app = make_app(paged, )

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("2")
            await settle(pilot)
            screen = app.screen
            table = screen.query_one("#runs-table")
            text = screen_text(app)
            assert "runs 1–100 of 268" in text and "page 1/3" in text
            assert table.row_count == 100  # one page, not the whole history
            assert text.index(FAILED_RUN) < text.index(SUCCESS_RUN)  # newest first
            await pilot.press("right_square_bracket")
            await settle(pilot)
            assert "runs 101–200 of 268" in screen_text(app)
            await pilot.press("n", "n")  # past the end: stays on the last page
            await settle(pilot)
            assert "runs 201–268 of 268" in screen_text(app) and table.row_count == 68
            await pilot.press("left_square_bracket", "p")
            await settle(pilot)
            assert "runs 1–100 of 268" in screen_text(app)
            await pilot.press("end")  # the oldest runs, then home: the newest, the cursor on the first
            await settle(pilot)
            assert "runs 201–268 of 268" in screen_text(app)
            await pilot.press("home")
            await settle(pilot)
            assert "runs 1–100 of 268" in screen_text(app) and table.cursor_row == 0

            # an unknown status is said, not an empty list
            await pilot.press("slash", *"status:bogus", "enter")
            await settle(pilot)
            assert any("unknown status 'bogus'" in n for n in app.notices)
            assert "runs 1–100 of 268" in screen_text(app)
            await pilot.press("escape")
            await settle(pilot)

            # / filters by status, pipeline and text
            await pilot.press("slash")
            await settle(pilot)
            await pilot.press(*"s:failed", "enter")
            await settle(pilot)
            text = screen_text(app)
            assert "filter: status:failed" in text
            statuses = {str(table.get_row_at(i)[2]) for i in range(table.row_count)}
            assert statuses == {"✘ failed"}
            assert "of 53" in text  # 50 bulk failures + 3 seeded
            await pilot.press("escape")  # clears the filter
            await settle(pilot)
            assert "runs 1–100 of 268" in screen_text(app)
            await pilot.press("slash", *"p:clean_o", "enter")
            await settle(pilot)
            assert "of 4" in screen_text(app)
            pipelines = {str(table.get_row_at(i)[1]) for i in range(table.row_count)}
            assert pipelines == {"silver.clean_orders"}
            await pilot.press("slash", *"cafe01", "enter")  # free text matches ids, pipelines and errors
            await settle(pilot)
            assert table.row_count == 1
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == FAILED_RUN
            text = screen_text(app)
            assert "rows written 0" in text and "8.77s" in text
            assert "11:00:08 error   RAT-RUN-003" in text  # the log tail
            await pilot.press("escape")
            await settle(pilot)
            assert app.screen.MODE == "runs"
            assert not app.crashes

    run(go())


def test_quality_failed_first_sample_rows_and_sql(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("3")
            await settle(pilot)
            screen = app.screen
            table = screen.query_one("#quality-table")
            statuses = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            assert statuses[0] == "✘ failed"
            assert statuses[1:3] == ["▲ warned", "▲ warned"]
            assert set(statuses[3:]) == {"✔ passed"}
            text = screen_text(app)
            assert "✘ 1 failed" in text and "▲ 2 warned" in text and "✔ 3 passed" in text
            assert "3 violating rows" in text
            assert "Sample violating rows (3 of 3)" in text
            sample = screen.query_one("#quality-sample")
            assert [str(c) for c in sample.get_row_at(0)] == ["1017", "2", "-4.50", "-9.00"]
            assert "WHERE quantity <= 0" not in screen_text(app)
            await pilot.press("s")
            await settle(pilot)
            assert "WHERE quantity <= 0" in screen_text(app)  # the SQL on demand, as the test's file says it
            await pilot.press("down")  # the warned test
            await settle(pilot)
            assert "Sample violating rows (2 of 2)" in screen_text(app)
            await pilot.press("p")  # hide passed
            await settle(pilot)
            assert table.row_count == 3
            await pilot.press("up", "enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == FAILED_RUN
            assert not app.crashes

    run(go())


def _table(catalog, root, ref: str, key: str, rows: int) -> None:
    location = root / "ecommerce" / "warehouse" / "bronze" / f"{key.rsplit('.', 1)[1]}-{ref}"
    table = catalog.create_table(ref, key, pa.schema([("id", pa.int64())]), location)
    table.append(pa.table({"id": list(range(rows))}))
    catalog.record_commit(ref, f"write {key}")


def test_branches_diff_merge_and_delete(tmp_path):
    from ratui.engine.facade.engine import Engine

    root = copy_sample(tmp_path)
    engine = Engine.open(root)
    catalog = engine.state.catalog
    _table(catalog, root, "main", "ecommerce.bronze.base", 5)
    catalog.create_branch("dev")
    _table(catalog, root, "dev", "ecommerce.bronze.fresh", 3)
    catalog.create_branch("hot")
    _table(catalog, root, "hot", "ecommerce.bronze.clash", 2)
    _table(catalog, root, "main", "ecommerce.bronze.clash", 4)
    catalog.create_branch("stale")
    # a run going on in another process (this test's pid is alive: recovery leaves it be), on its own branch
    live = "261123120000abc123"
    RunRecord(engine.state.history).create(live, "ecommerce.bronze.raw_orders", "cli", "full_refresh", None)
    RunRecord(engine.state.history).update(live, status="running", branch=f"run-{live}")
    catalog.create_branch(f"run-{live}")
    engine.close()
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            screen = app.screen
            table = screen.query_one("#branches-table")
            refs = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            assert refs[0] == "main" and sorted(refs[1:]) == sorted(["dev", "hot", "stale", f"run-{live}"])
            # main's tables are a worker's load: wait for the loaded title and its rows, then read that screen
            await wait_for(pilot, lambda: "Tables on main (2)" in (t := screen_text(app))
                           and "ecommerce.bronze.base" in t, 60)
            text = screen_text(app)
            assert "5 ref(s)" in text and "Tables on main (2)" in text

            # a live run's branch can be neither merged by hand nor deleted: the run owns it
            def goto(ref: str) -> None:
                names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
                table.move_cursor(row=names.index(ref))

            goto(f"run-{live}")
            await settle(pilot)
            for key, verb in (("m", "merge"), ("d", "delete")):
                await pilot.press(key)
                await wait_for(pilot, lambda v=verb: any(f"Cannot {v} run-{live}" in n for n in app.notices), 10)
                assert not isinstance(app.screen, ConfirmScreen)
                assert any(f"Run {live} of ecommerce.bronze.raw_orders is still running" in n for n in app.notices)
            assert f"run-{live}" in [r.name for r in app.controller.engine.state.catalog.list_refs()]
            assert "ecommerce.bronze.base" in text and "5 rows" in text

            goto("dev")
            # the diff is a worker's, and the list refreshes while in view (its title then says "loading…" again
            # over the last rows): wait for dev's diff itself, loaded, and read the screen in that same moment
            await wait_for(pilot, lambda: "Diff of dev against main: 2 table(s) differ" in screen_text(app)
                           and "bronze.fresh" in screen_text(app), 60)
            text = screen_text(app)
            # dev added fresh; main added clash after dev forked: both differ, each said by who changed it
            assert "Diff of dev against main: 2 table(s) differ (1 changed on dev, 1 on main)" in text
            diff = screen.query_one("#diff-table")
            assert [str(c) for c in diff.get_row("ecommerce.bronze.fresh")][:5] == [
                "bronze.fresh", "added", "dev", "3 / -", "1 / -"]  # rows and files on dev / on main
            assert [str(c) for c in diff.get_row("ecommerce.bronze.clash")][:4] == [
                "bronze.clash", "added", "main", "- / 4"]

            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeScreen), 10)
            assert "1 table(s) would be applied to main" in flat(screen_text(app))
            assert "As is: bronze.fresh. main gets them as dev has them" in flat(screen_text(app))  # issue 48
            await pilot.press("y")
            await settle(pilot)
            assert any("Merged dev into main" in n for n in app.notices)
            assert "ecommerce.bronze.fresh" in app.controller.engine.state.catalog.table_pointers("main")

            goto("hot")  # in conflict
            await settle(pilot)
            assert screen.cursor_key() == "hot"
            # the diff pane is a worker's: on a loaded machine it paints after the cursor moves
            # (its title and its rows paint apart: wait for both)
            await wait_for(pilot, lambda: all(s in screen_text(app) for s in ("1 in conflict", "main changed too")), 30)
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeScreen), 10)
            text = flat(screen_text(app))
            assert "1 conflict(s)" in text and "RAT-CAT-003" in text
            await pilot.press("y")  # refused: the merge would fail
            await settle(pilot)
            assert isinstance(app.screen, MergeScreen)
            await pilot.press("escape")
            await settle(pilot)
            pointers = app.controller.engine.state.catalog.table_pointers("main")
            assert pointers["ecommerce.bronze.clash"].find("-main") > 0

            goto("stale")
            await settle(pilot)
            await pilot.press("d")  # stale: delete with confirmation
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            assert "Delete branch stale?" in screen_text(app)
            await pilot.press("n")  # no: nothing happens
            await settle(pilot)
            assert "stale" in [r.name for r in app.controller.engine.state.catalog.list_refs()]
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            await pilot.press("y")
            await settle(pilot)
            assert "stale" not in [r.name for r in app.controller.engine.state.catalog.list_refs()]
            assert table.row_count == 4

            await pilot.press("home", "d")  # main cannot be deleted
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            assert any("RAT-CAT-004" in n for n in app.notices)
            assert not app.crashes

    run(go())


def test_palette_jump_help_and_theme(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+p")
            await settle(pilot)
            await pilot.press(*"open br")
            # the palette searches as it is typed: wait until its list is the search's (the other screens gone)
            await wait_for(pilot, lambda: "Open Branches" in (t := screen_text(app)) and "Open Runs" not in t, 30)
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert app.current_mode == "branches"

            await pilot.press("ctrl+p", *"raw_cu")
            await wait_for(pilot, lambda: "Run bronze.raw_customers+ (with descendants)" in screen_text(app), 30)
            text = screen_text(app)
            assert "Run bronze.raw_customers" in text
            assert "Run bronze.raw_customers+ (with descendants)" in text
            await pilot.press("escape")
            await settle(pilot)

            await pilot.press("colon")
            await settle(pilot)
            assert isinstance(app.screen, JumpScreen)
            await pilot.press(*"runs", "enter")
            await settle(pilot)
            assert app.current_mode == "runs"
            await pilot.press("colon", *"qual", "enter")  # a prefix is enough
            await settle(pilot)
            assert app.current_mode == "quality"
            await pilot.press("colon", *"nowhere", "enter")
            await settle(pilot)
            assert app.current_mode == "quality" and any("Nothing is called 'nowhere'" in n for n in app.notices)
            await pilot.press("colon", *f"run {SUCCESS_RUN}", "enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == SUCCESS_RUN
            await pilot.press("escape", "1")
            await settle(pilot)
            assert app.current_mode == "pipelines"

            # a run id alone, a pipeline by name (or the start of one), an unknown run said so
            await pilot.press("2", "colon", *SUCCESS_RUN, "enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == SUCCESS_RUN
            await pilot.press("escape", "colon", *"clean_ord", "enter")
            await settle(pilot)
            assert app.current_mode == "pipelines"
            assert app.screen.selected == ("pipeline", "ecommerce.silver.clean_orders")
            await pilot.press("colon", *"run 999999nosuch", "enter")
            await settle(pilot)
            assert not isinstance(app.screen, RunScreen)
            assert any("No run '999999nosuch' in the history" in n for n in app.notices)

            await pilot.press("question_mark")
            await settle(pilot)
            assert isinstance(app.screen, HelpScreen)
            text = screen_text(app)
            assert "Run downstream" in text and "Full refresh" in text and "Jump" in text
            run_detail = dict(app.help_sections())["Run detail"]
            assert ("v", "Debug log") in run_detail and ("R", "Re-run") in run_detail
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, HelpScreen)

            # the theme says what it is now, and is remembered in the user's config folder
            dark = app.theme
            await pilot.press("ctrl+t")
            await settle(pilot)
            assert app.theme == "textual-light" and "Theme: Theme: light." in app.notices
            assert user_settings.load() == {"theme": "textual-light"}
            assert make_app(seeded).theme == "textual-light"  # the next console starts with it
            await pilot.press("ctrl+t")
            await settle(pilot)
            assert app.theme == dark and user_settings.load() == {"theme": dark}
            assert not app.crashes

    run(go())


def test_errors_open_the_error_screen_not_a_crash(seeded, monkeypatch):
    app = make_app(seeded)

    def boom(*args, **kwargs):
        raise RuntimeError("the history exploded")

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            monkeypatch.setattr(app.controller, "runs_page", boom)
            await pilot.press("2")  # its load fails in a worker
            await settle(pilot)
            assert isinstance(app.screen, ErrorScreen)
            text = flat(screen_text(app))
            assert "RuntimeError: the history exploded" in text
            assert "console is still running" in text
            assert "Traceback" not in text
            await pilot.press("t")
            await settle(pilot)
            assert "Traceback" in screen_text(app)
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, ErrorScreen)
            log = (seeded / ".ratui" / "logs" / "console.log").read_text()
            assert "the history exploded" in log

            # an exception in a key handler: the error screen again, the console keeps going
            screen_cls = type(app.get_screen("pipelines") if False else app.screen)
            monkeypatch.setattr(screen_cls, "action_refresh", lambda self: 1 / 0)
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, ErrorScreen)
            assert "ZeroDivisionError" in screen_text(app)
            assert len(app.crashes) == 1
            await pilot.press("escape", "1")
            await settle(pilot)
            assert app.current_mode == "pipelines" and "raw_customers" in screen_text(app)

    run(go())


def test_a_broken_settings_file_shows_its_code(tmp_path):
    root = copy_sample(tmp_path)
    (root / "ratui.yaml").write_text("namespace: [oops\n")
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, ErrorScreen)
            text = flat(screen_text(app))
            assert "RAT-CFG-007" in text and "hint:" in text

    run(go())


def test_status_line_follows_spark(seeded):
    from ratui.console.controller import SparkItem

    app = make_app(seeded, spark_state=None)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.controller._post(SparkItem("starting"))
            await settle(pilot)
            assert "◌ Spark starting…" in screen_text(app)
            app.controller._post(SparkItem("ready"))
            await settle(pilot)
            assert "● Spark ready" in screen_text(app)
            assert "no runs in flight" in screen_text(app)

    run(go())


def test_screens_follow_other_processes_and_the_project_tree_without_being_asked(tmp_path):
    """A run another process starts and ends, a template broken and fixed on disk, a new pipeline folder: each
    shows within seconds, watch mode off and no ctrl+r."""
    import os

    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.history import History
    from ratui.engine.state.processes import started_at

    root = copy_sample(tmp_path)
    seed_history(root)
    app = make_app(root)
    other = History(load_settings(root).db_path)  # another writer of the same database, as a CLI run would be
    run_id = "261123130000d00d01"

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: app.controller.follower is not None, 20)
            await pilot.press("2")
            await settle(pilot)
            assert run_id not in screen_text(app) and "no runs in flight" in screen_text(app)

            RunRecord(other).create(run_id, "ecommerce.bronze.raw_orders", "cli", "full_refresh", None)
            # a live process that is not this one, with its own start time (else the dead-run monitor takes the
            # pid for a reused one and fails the run)
            RunRecord(other).update(run_id, status="running", started_at="2026-03-01T12:00:00.000000+00:00",
                                    pid=os.getppid(), pid_started=started_at(os.getppid()))
            await wait_for(pilot, lambda: run_id in screen_text(app) and "1 run in flight" in screen_text(app), 10)
            RunRecord(other).update(run_id, status="success", finished_at="2026-03-01T12:00:05.000000+00:00",
                                    duration_ms=5000)
            await wait_for(pilot, lambda: "no runs in flight" in screen_text(app), 10)

            # the project tree: a broken template shows its error, the fix clears it, a new folder appears
            await pilot.press("1")
            await settle(pilot)
            sql = root / "ecommerce/pipelines/bronze/raw_products/pipeline.sql"
            good = sql.read_text()
            sql.write_text(good + "\n{{ oops(\n")
            await wait_for(pilot, lambda: "RAT-TPL" in screen_text(app), 10)
            assert "✘ raw_products" in screen_text(app)
            sql.write_text(good)
            await wait_for(pilot, lambda: "RAT-TPL" not in screen_text(app), 10)
            new = root / "ecommerce/pipelines/gold/brand_new"
            new.mkdir()
            (new / "pipeline.sql").write_text("-- @merge_strategy: full_refresh\nSELECT 1 AS one\n")
            await wait_for(pilot, lambda: "brand_new" in screen_text(app), 10)
            assert not any("Project reloaded" in n for n in app.notices)  # followed quietly

            # a run whose process died: failed as soon as the dead-run monitor notices, without a keypress
            dead = subprocess.Popen([sys.executable, "-c", "pass"])
            dead.wait()
            gone = "261123130000d00d02"
            RunRecord(other).create(gone, "ecommerce.bronze.raw_events", "cli", "append_only", None)
            RunRecord(other).update(gone, status="running", started_at="2026-03-01T12:01:00.000000+00:00", pid=dead.pid,
                                    pid_started=None)
            await pilot.press("2")
            await wait_for(pilot, lambda: gone in screen_text(app), 10)
            await wait_for(pilot, lambda: any(gone in line and "✘ failed" in line
                                              for line in screen_text(app).splitlines()), 15)
            assert not app.crashes

    run(go())


def test_branch_ages_keep_counting(tmp_path, monkeypatch):
    from datetime import timedelta

    import ratui.screens.branches as branches_screen

    monkeypatch.setattr(branches_screen, "AGE_TICK", 0.5)
    root = copy_sample(tmp_path)
    clock = {"now": None}
    app = make_app(root, now=lambda: clock["now"] or utc_now())

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await wait_for(pilot, lambda: "main" in screen_text(app), 10)
            table = app.screen.query_one("#branches-table")
            # the console's clock, not the machine's pace, says how old main is: a second after it was made
            from ratui.console.format import parse_time

            made = parse_time(app.screen.refs["main"].created_at)
            clock["now"] = made + timedelta(seconds=1)
            await wait_for(pilot, lambda: str(table.get_row_at(0)[3]) == "1s", 10)
            assert str(table.get_row_at(0)[3]) in ("0s", "1s", "2s")
            clock["now"] = made + timedelta(hours=2, minutes=5)
            await wait_for(pilot, lambda: str(table.get_row_at(0)[3]) == "2h", 10)

    run(go())


def test_sql_wraps_long_lines_marks_the_error_line_and_follows_the_theme(tmp_path, monkeypatch):
    import ratui.screens.pipelines_detail as pipelines_detail

    root = copy_sample(tmp_path)
    sql = root / "ecommerce/pipelines/bronze/raw_products/pipeline.sql"
    good = sql.read_text().rstrip("\n")
    bad_line = len(good.splitlines()) + 2
    sql.write_text(good + "\n-- " + "x" * 150 + " END_OF_A_LONG_LINE\nJOIN {{ ref('bronze.nosuch') }} ON 1 = 1\n")
    themes: list[bool] = []
    real = pipelines_detail.code_view
    monkeypatch.setattr(pipelines_detail, "code_view",
                        lambda *a, **kw: themes.append(kw["dark"]) or real(*a, **kw))
    app = make_app(root)

    async def go():
        async with app.run_test(size=(100, 60)) as pilot:
            await settle(pilot)
            app.screen.select_key("ecommerce.bronze.raw_products")
            await settle(pilot)
            text = screen_text(app)
            assert "END_OF_A_LONG_LINE" in text  # wrapped, not clipped
            assert f"❱ {bad_line}" in text  # the line the error points at
            assert themes and themes[-1] is True
            await pilot.press("ctrl+t")
            await settle(pilot)
            assert app.theme == "textual-light" and themes[-1] is False  # drawn again in the light theme's colours

    run(go())


def test_quality_tests_spark_could_not_run_say_not_run_spark_unreachable_and_are_no_failure(tmp_path):
    """A run whose Spark Connect server went away during its quality phase (RAT-SPK-001): its tests are `not_run`
    with Spark's error; the Quality screen says `not run: Spark unreachable` and counts none of them as failed."""
    import json as _json

    from ratui.engine.state.history import History

    root = copy_sample(tmp_path)
    seed_history(root)
    run_id = "260301120000beef01"
    history = History(root / ".ratui" / "ratui.db")
    history.db["runs"].insert({
        "id": run_id, "pipeline": "ecommerce.silver.clean_orders", "status": "failed", "trigger": "cli",
        "strategy": "incremental", "queued_at": "2026-03-01T12:00:00.000Z", "started_at": "2026-03-01T12:00:00.000Z",
        "finished_at": "2026-03-01T12:00:09.000Z", "duration_ms": 9000, "rows_written": 0, "warnings": 0,
        "branch": f"run-{run_id}", "phases": _json.dumps({"quality": 4000}), "error_code": "RAT-SPK-001",
        "error_message": "Spark Connect server unreachable (UNAVAILABLE): failed to connect to all addresses",
        "error_hint": "Check spark.master / spark.remote in ratui.yaml"})
    for test in ("not_null_keys", "positive_amounts"):
        RunRecord(history).add_quality(run_id, {
            "test": test, "severity": "error", "status": "not_run", "violations": 0, "duration_ms": 0,
            "columns": [], "sample": [], "sql": "", "file": None, "finished_at": "2026-03-01T12:00:09.000Z",
            "error": "RAT-SPK-001 Spark Connect server unreachable (UNAVAILABLE): failed to connect to all addresses"})
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.open_quality(run_id)
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, QualityScreen)
            table = screen.query_one("#quality-table")
            assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == ["○ not run", "○ not run"]
            text = screen_text(app)
            assert "✘ 0 failed" in text and "○ 2 not run" in text
            assert "not run: Spark unreachable" in text
            assert "RAT-SPK-001 Spark Connect server unreachable" in flat(text)
            assert not app.crashes

    run(go())
