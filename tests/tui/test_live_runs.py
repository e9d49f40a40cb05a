"""Real runs from the console, on Spark: one that succeeds (watched live, then in the tree, history and catalog)
and one cancelled from the run detail (confirmation, `cancelled`, main unchanged, branch gone)."""

from __future__ import annotations

import threading
import time

from ratui.console.controller import utc_now
from ratui.screens.dialogs import ConfirmScreen
from ratui.screens.run import RunScreen

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for

RUN_TIMEOUT = 240  # a shared 2-core machine can be very slow


def hold_at_quality(engine):
    """Hold the first run to start its quality phase there (in the run's thread) until `release` is set, so a key
    pressed meanwhile finds it running: returns (reached, release, unsubscribe)."""
    from ratui.engine.events import PhaseStarted

    reached, release = threading.Event(), threading.Event()

    def hold(event) -> None:
        if isinstance(event, PhaseStarted) and event.phase == "quality" and not reached.is_set():
            reached.set()
            release.wait(120)

    return reached, release, engine.subscribe(hold)


def test_run_and_cancel_from_the_console(spark, tmp_path):
    root = copy_sample(tmp_path)
    app = make_app(root, spark_state=None, clock=time.monotonic, now=utc_now)

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(pilot)
            assert app.spark_state == "ready"  # the session fixture started it; the status line follows Spark
            assert "Spark ready" in screen_text(app)
            screen = app.screen
            assert screen.selected == ("pipeline", "ecommerce.bronze.raw_customers")

            # ---- run the selected pipeline: the live run detail opens and follows the phases (the run waits at
            # the start of its quality phase until the detail has shown a phase running: a warm run is quick)
            from ratui.engine.events import PhaseStarted

            shown_running = threading.Event()
            unsubscribe = app.controller.engine.subscribe(
                lambda e: shown_running.wait(120) if isinstance(e, PhaseStarted) and e.phase == "quality" else None)
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None, 30)
            detail = app.screen
            seen_running = set()

            def progressed() -> bool:
                if detail.run.current_phase:
                    seen_running.add(detail.run.current_phase)
                    shown_running.set()
                return detail.run.finished

            await wait_for(pilot, progressed, RUN_TIMEOUT, step=0.1)
            unsubscribe()
            await settle(pilot)
            live = detail.run
            assert live.status == "success", screen_text(app)
            assert live.rows_written == 5000
            assert seen_running, "never saw a phase running"
            assert all(p.state == "done" for p in live.phases.values())
            text = screen_text(app)
            assert "✔ success" in text
            assert "rows written 5,000" in text
            assert "2 build" in text and "✔ done" in text
            assert "unique_customer_id" in text  # its quality test, live
            assert f"merged run-{live.run_id} into main" in flat(text)
            catalog = app.controller.engine.state.catalog
            assert "ecommerce.bronze.raw_customers" in catalog.table_pointers("main")

            # ---- back on Pipelines the tree shows the result; the history has the run
            await pilot.press("escape")
            await settle(pilot)
            await wait_for(pilot, lambda: "✔ raw_customers" in screen_text(app), 20)
            await pilot.press("2")
            await settle(pilot)
            assert live.run_id in screen_text(app)

            # ---- two runs in flight at once, in the background, each on its own branch; toasts when they end
            await pilot.press("1")
            await settle(pilot)

            def select(key: str) -> None:
                tree = app.screen.query_one("#pipeline-tree")
                tree.move_cursor(app.screen.nodes[key])

            async def launch(key: str) -> object:
                await pilot.press(key)
                await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None, 30)
                started = app.screen.run
                await pilot.press("escape")
                await settle(pilot)
                return started

            # hold the first run at its quality phase until the second has started, so they overlap however
            # fast the machine is (the listener runs on the first run's own worker thread)
            from ratui.engine.events import RunStarted

            second_started, release = threading.Event(), threading.Event()
            holding: dict[str, str] = {}

            left_detail = threading.Event()

            def hold(event) -> None:
                if isinstance(event, RunStarted) and event.pipeline == "ecommerce.bronze.raw_products":
                    holding["other"] = event.run_id
                    second_started.set()
                if (isinstance(event, PhaseStarted) and event.phase == "quality"
                        and holding.get("other") == event.run_id):
                    # a run that ends while its detail is on screen gets no toast: this one (a second's work on a
                    # warm Spark) ends only once the test has gone back to the pipelines
                    left_detail.wait(120)
                if isinstance(event, RunStarted) and event.pipeline == "ecommerce.silver.clean_customers":
                    holding["run"] = event.run_id
                if (isinstance(event, PhaseStarted) and event.phase == "quality"
                        and holding.get("run") == event.run_id):
                    release.wait(120)  # cannot finish before the test has seen both runs in flight

            unsubscribe = app.controller.engine.subscribe(hold)
            select("ecommerce.silver.clean_customers")  # incremental: f forces a full refresh
            await settle(pilot)
            refreshed = await launch("f")
            select("ecommerce.bronze.raw_products")
            await settle(pilot)
            other = await launch("r")
            left_detail.set()
            assert refreshed.strategy == "full_refresh"
            await wait_for(pilot, second_started.is_set, 60)
            assert not refreshed.finished, "the two runs did not overlap"
            release.set()
            await wait_for(pilot, lambda: refreshed.finished and other.finished, RUN_TIMEOUT)
            unsubscribe()
            await settle(pilot)
            assert (refreshed.status, other.status) == ("success", "success")
            assert refreshed.branch != other.branch
            assert app.controller.engine.state.history.get_run(refreshed.run_id)["strategy"] == "full_refresh"
            await wait_for(pilot, lambda: any("clean_customers succeeded" in n for n in app.notices)
                           and any("raw_products succeeded" in n for n in app.notices), 10)

            # ---- cancel a run from its detail: confirmation, then cancelled, main unchanged, branch gone. The run
            # is held at the start of its quality phase until the cancel is on its way: on a warm JVM it takes
            # about a second, and pressing c must find it still running
            main_before = dict(catalog.table_pointers("main"))
            at_quality, cancel_sent, unsubscribe = hold_at_quality(app.controller.engine)
            select("ecommerce.bronze.raw_orders")
            await settle(pilot)
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None, 30)
            doomed = app.screen.run
            await wait_for(pilot, at_quality.is_set, RUN_TIMEOUT)
            assert not doomed.finished
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            assert "main is unchanged" in flat(screen_text(app))
            await pilot.press("y")
            await wait_for(pilot, lambda: any(f"Cancelling run {doomed.run_id}" in n for n in app.notices), 30)
            cancel_sent.set()
            unsubscribe()
            await wait_for(pilot, lambda: doomed.finished, RUN_TIMEOUT)
            await settle(pilot)
            assert doomed.status == "cancelled", screen_text(app)
            assert "■ cancelled" in screen_text(app)
            assert (doomed.error or {}).get("code") == "RAT-RUN-001"
            assert catalog.table_pointers("main") == main_before
            assert f"run-{doomed.run_id}" not in [r.name for r in catalog.list_refs()]
            record = app.controller.engine.state.history.get_run(doomed.run_id)
            assert record["status"] == "cancelled"

            # ---- run all, then cancel: the batch stops, the rest is never started. The batch's first run to reach
            # its quality phase is held there until the cancel is on its way, so c always finds a run in flight
            # (unchanged pipelines are skipped at once, and the others take a second or two on a warm JVM)
            held, let_go, unsubscribe = hold_at_quality(app.controller.engine)
            await pilot.press("escape", "a")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None, 30)
            batch = app.screen.batch
            assert batch is not None
            assert "batch " in screen_text(app) and "/11" in screen_text(app)
            await wait_for(pilot, held.is_set, RUN_TIMEOUT)
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None
                           and app.screen.run.status == "running", 30)
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            assert "The rest of its batch is not started" in flat(screen_text(app))
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Cancelling run" in n for n in app.notices), 30)
            let_go.set()
            unsubscribe()
            await wait_for(pilot, lambda: any(n.startswith("Batch finished") for n in app.notices), RUN_TIMEOUT)
            statuses = [r.status for r in app.store.in_batch(batch)]
            assert len(statuses) < 10 and "cancelled" in statuses, statuses
            assert any("not started (cancelled)" in n for n in app.notices)
            assert not app.crashes

    run(go())


TINY = {
    "demo/pipelines/bronze/a/pipeline.sql": "-- @merge_strategy: full_refresh\nSELECT 1 AS id\n",
    "demo/pipelines/silver/b/pipeline.sql": "-- @merge_strategy: full_refresh\nSELECT id FROM {{ ref('bronze.a') }}\n",
}


def test_skips_say_why_forced_runs_run_anyway_and_a_batch_counts_each_outcome(spark, make_project):
    root = make_project(TINY)
    app = make_app(root, spark_state=None, clock=time.monotonic, now=utc_now)

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(pilot)
            assert app.screen.selected == ("pipeline", "demo.bronze.a")

            async def run_key(key: str, previous: str | None = None):
                await pilot.press(key)
                await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None
                               and app.screen.run.run_id != previous and app.screen.run.finished, RUN_TIMEOUT)
                await settle(pilot)
                return app.screen.run

            first = await run_key("r")
            assert first.status == "success", screen_text(app)
            assert first.live and "type rebuild why first run" in flat(screen_text(app))  # told as it ran
            assert "compiled SQL" not in screen_text(app)
            await pilot.press("v")  # the debug lines of a run of this session: its compiled SQL
            await settle(pilot)
            assert "compiled SQL:" in screen_text(app) and "SELECT 1 AS id" in screen_text(app)
            await pilot.press("escape")
            await settle(pilot)

            # nothing changed: the run is skipped and says why, with its trigger and its log line
            skipped = await run_key("r", first.run_id)
            assert skipped.status == "skipped" and skipped.outcome == "unchanged"
            text = flat(screen_text(app))
            assert f"skipped: unchanged since run {first.run_id}" in text
            assert "trigger console" in text
            assert f"info skipped: unchanged since run {first.run_id}" in text  # the log is not empty
            assert "failed" not in text

            # R runs it again anyway (the CLI's --force)
            forced = await run_key("R", skipped.run_id)
            assert forced.status == "success", screen_text(app)
            record = app.controller.engine.state.history.get_run(forced.run_id)
            assert record["reason"].startswith("forced") and record["trigger"] == "console"
            assert f"type full why forced (unchanged since run {first.run_id})" in flat(screen_text(app))

            # a batch counts each outcome apart: unchanged is not "did not succeed"
            await pilot.press("1")
            await settle(pilot)
            await pilot.press("plus")
            await wait_for(pilot, lambda: any("1 of 2 succeeded" in n for n in app.notices), RUN_TIMEOUT)
            assert "Batch finished: 1 of 2 succeeded, 1 unchanged (skipped)." in app.notices, list(app.notices)
            await settle(pilot)
            text = flat(screen_text(app))  # the batch's overview: each pipeline with how it ended
            assert "Batch" in text and "bronze.a unchanged (skipped)" in text and "silver.b succeeded" in text

            # asked whether to stop a run that then ends by itself: the question goes, and says why
            from ratui.engine.events import PhaseStarted
            from ratui.screens.dialogs import CancelRunScreen

            release = threading.Event()
            unsubscribe = app.controller.engine.subscribe(
                lambda e: release.wait(60) if isinstance(e, PhaseStarted) and e.phase == "quality" else None)
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run.finished, 30)
            await pilot.press("escape", "1")
            await settle(pilot)
            app.screen.select_key("demo.bronze.a")
            await pilot.press("F")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None
                           and not app.screen.run.finished and app.screen.run.run_id != forced.run_id, 30)
            held = app.screen.run
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, CancelRunScreen), 10)
            text = flat(screen_text(app))
            assert "Stop the run (y)" in text and "Keep it running (n)" in text and "Cancel (n)" not in text
            release.set()
            await wait_for(pilot, lambda: held.finished and not isinstance(app.screen, CancelRunScreen), 60)
            unsubscribe()
            assert held.status == "success"
            assert any("The run ended before it was stopped" in n for n in app.notices)

            # a failure upstream: the downstream run is skipped for it, and counted as such
            (root / "demo/pipelines/bronze/a/pipeline.sql").write_text(
                "-- @merge_strategy: full_refresh\nSELECT CAST('x' AS INT) AS id\n")
            await pilot.press("1", "ctrl+r")
            await settle(pilot)
            await pilot.press("plus")
            await wait_for(pilot, lambda: any("0 of 2 succeeded" in n for n in app.notices), RUN_TIMEOUT)
            assert "Batch finished: 0 of 2 succeeded, 1 failed, 1 skipped (upstream failed)." in app.notices, \
                list(app.notices)

    run(go())
