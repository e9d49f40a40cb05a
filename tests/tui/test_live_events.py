"""Engine events reach the console as coalesced Textual messages and draw the run live (synthetic events: no
Spark), plus the pure pieces behind it: run state, filters and formatting."""

from __future__ import annotations

import threading

from ratui.console.controller import Controller, EngineItem, RunFilter
from ratui.console.format import bar, fmt_age, fmt_ms, sparkline
from ratui.console.live import LiveRun, RunStore
from ratui.engine.events import (
    LogLine, PhaseFinished, PhaseStarted, QualityResultEvent, RunFinished, RunQueued, RunStarted, StagingProgress,
)
from ratui.screens.dialogs import ConfirmScreen

from .conftest import flat, make_app, run, screen_text, settle, wait_for
from .seed import FIXED_NOW

KEY = "ecommerce.gold.product_funnel"
RID = "260301120000f00d01"


def emit_in_thread(bus, events) -> None:
    thread = threading.Thread(target=lambda: [bus.emit(e) for e in events])
    thread.start()
    thread.join()


def test_a_burst_of_events_is_coalesced_and_the_run_drawn_live(seeded):
    app = make_app(seeded)
    drains: list[int] = []

    async def go():
        async with app.run_test(size=(130, 42)) as pilot:
            await settle(pilot)
            controller = app.controller
            original = controller.drain

            def counting():
                items = original()
                drains.append(len(items))
                return items

            controller.drain = counting
            bus = controller.engine._bus
            burst = [RunQueued(RID, KEY, "console"), RunStarted(RID, KEY, f"run-{RID}"),
                     PhaseStarted(RID, "branch"), PhaseFinished(RID, "branch", "done", 30),
                     PhaseStarted(RID, "config"), PhaseFinished(RID, "config", "done", 20),
                     *[LogLine(RID, "info", f"progress line {i}") for i in range(600)],
                     PhaseStarted(RID, "build")]
            emit_in_thread(bus, burst)
            await settle(pilot)
            assert sum(drains) == len(burst)
            assert len(drains) < 60, f"{len(drains)} repaints for {len(burst)} events"
            live = app.store.get(RID)
            assert live.status == "running" and live.current_phase == "build"
            assert app.active_runs == 1
            assert "product_funnel" in screen_text(app) and "build" in screen_text(app)  # the tree shows it
            assert "● 1 run in flight" in screen_text(app)

            # cancel from the tree asks first; so does quitting with a run in flight
            screen = app.screen
            screen.query_one("#pipeline-tree").move_cursor(screen.nodes[KEY])
            await settle(pilot)
            await pilot.press("c")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen) and "Stop this run?" in screen_text(app)
            assert f"{KEY} ({RID})" in flat(screen_text(app))
            await pilot.press("n")
            await settle(pilot)
            await pilot.press("ctrl+q")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen) and "Quit ratui?" in screen_text(app)
            assert "1 run(s) in flight" in flat(screen_text(app))
            await pilot.press("n")
            await settle(pilot)
            assert app.is_running

            app.open_run(RID)
            await settle(pilot)
            text = screen_text(app)
            assert "● running" in text
            assert "0 branch    ✔ done" in text and "2 build" in text
            assert "3 write     · waiting" in text
            assert "progress line 599" in text  # the log tail follows

            emit_in_thread(bus, [
                PhaseFinished(RID, "build", "done", 900), PhaseStarted(RID, "write"),
                PhaseFinished(RID, "write", "done", 300), PhaseStarted(RID, "quality"),
                QualityResultEvent(RID, "unique_product_id", "error", "failed", 4, 120),
                PhaseFinished(RID, "quality", "failed", 150),
                RunFinished(RID, KEY, "failed", 0, 1500, {"code": "RAT-RUN-003", "message": "quality gate failed",
                                                          "file": None, "line": None, "hint": "See the results."},
                            0, {"branch": 30, "config": 20, "build": 900, "write": 300, "quality": 150}),
            ])
            await settle(pilot)
            await wait_for(pilot, lambda: live.finished, 5)
            text = screen_text(app)
            assert "✘ failed" in text
            assert "4 quality   ✘ failed" in text and "5 resolve   ↷ skipped" in text
            assert "error[RAT-RUN-003]" in text and "quality gate failed" in text
            assert "unique_product_id" in text
            assert "64%" in text  # build's share of the phase profile: 900 of 1400 ms
            assert app.active_runs == 0
            assert not any("product_funnel failed" in n for n in app.notices)  # on screen: no toast

            await pilot.press("escape")
            emit_in_thread(bus, [RunQueued("x2", KEY, "console"), RunStarted("x2", KEY, "run-x2"),
                                 RunFinished("x2", KEY, "cancelled", 0, 10, None)])
            await settle(pilot)
            assert any("product_funnel was cancelled" in n for n in app.notices)  # in the background: a toast
            assert not app.crashes

    run(go())


def test_controller_tells_the_app_once_per_burst(tmp_path):
    controller = Controller(tmp_path)
    calls = []
    controller._notify = lambda: calls.append(1)
    threads = [threading.Thread(target=lambda: [controller._on_event(LogLine("r", "info", "x")) for _ in range(200)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(controller.drain()) == 800
    controller._on_event(LogLine("r", "info", "again"))
    assert len(calls) == 2


def test_run_state_from_events_and_from_history():
    store = RunStore()
    store.apply([EngineItem(RunQueued("a", "n.l.p", "console"), None, 0.0, "t"),
                 EngineItem(RunStarted("a", "n.l.p", "run-a"), None, 0.0, "t"),
                 EngineItem(PhaseStarted("a", "branch"), None, 1.0, "t")])
    run_a = store.get("a")
    assert run_a.phases["branch"].state == "running"
    _, ended = store.apply([EngineItem(RunFinished("a", "n.l.p", "cancelled", 0, 5, None), None, 2.0, "t")])
    assert ended == [run_a]
    assert run_a.phases["branch"].state == "cancelled" and run_a.phases["build"].state == "skipped"

    record = {"id": "b", "pipeline": "n.l.p", "status": "failed", "phases": {"branch": 5, "config": 2, "build": 40},
              "error_code": "RAT-SQL-001", "error_message": "boom", "quality": [], "logs": [
                  {"at": "2026-03-01T10:00:01.000Z", "level": "error", "message": "boom"}]}
    live = LiveRun.from_history(record)
    assert [p.state for p in live.phases.values()] == ["done", "done", "failed", "skipped", "skipped", "skipped"]
    assert live.error["code"] == "RAT-SQL-001"
    assert live.logs[0].at == "10:00:01"


def test_an_object_store_zone_being_fetched_shows_its_progress_in_the_build_row():
    from rich.console import Console

    from ratui.widgets.run_view import phase_table

    store = RunStore()
    store.apply([EngineItem(RunStarted("s", "n.l.p", "run-s"), None, 0.0, "t"),
                 EngineItem(PhaseStarted("s", "build"), None, 1.0, "t"),
                 EngineItem(StagingProgress("s", "orders", 120, 1000, 12_000, 100_000), None, 1.5, "t")])
    run_s = store.get("s")

    def build_row() -> str:
        console = Console(width=120, record=True)
        console.print(phase_table(run_s, now=2.0))
        return next(line for line in console.export_text().splitlines() if "build" in line)

    assert "fetching orders: 120/1000 objects" in build_row()
    store.apply([EngineItem(StagingProgress("s", "orders", 1000, 1000, 100_000, 100_000), None, 1.9, "t")])
    assert "fetching" not in build_row()  # all fetched: Spark reads them now, the bar is back


def test_filters_and_formatting():
    assert RunFilter.parse("status:failed pipeline:orders late rows") == RunFilter("orders", "failed", "late rows")
    assert RunFilter.parse("cancelled") == RunFilter(None, "cancelled", None)
    assert RunFilter.parse("p:gold s:success").describe() == "status:success pipeline:gold"
    assert not RunFilter.parse("").active
    assert fmt_ms(None) == "-" and fmt_ms(1234) == "1.23s" and fmt_ms(75_000) == "1m15s"
    assert sparkline([1, 2, 4, 8]) == "▂▃▅█"
    assert sparkline([]) == "" and len(sparkline(list(range(20)), 8)) == 8
    assert sparkline([5, 10])[-1] == "█"
    assert bar(1.0, 4) == "████" and bar(0.0, 4) == ""
    assert fmt_age("2026-03-01T11:58:00Z", FIXED_NOW) == "2m"
    assert fmt_age("2026-02-27T12:00:00Z", FIXED_NOW) == "2d"


def test_the_console_draws_before_loading_the_heavy_engine_modules():
    """Importing the App loads no PyIceberg, SQLAlchemy, PyArrow or PySpark: they load in the boot worker,
    after the first paint."""
    import subprocess
    import sys

    code = ("import sys, ratui.app; print(sorted(m for m in ('pyiceberg', 'pyspark', 'sqlalchemy', 'pyarrow') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
