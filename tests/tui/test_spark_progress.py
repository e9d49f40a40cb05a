"""Live Spark progress in the console (synthetic engine events, no Spark): while a phase runs a Spark job, the
run detail and the Pipelines tree show its tasks done of the total instead of a bare spinner, and the bar goes
when the phase ends."""

from __future__ import annotations

import pytest

from ratui.engine.events import PhaseFinished, PhaseStarted, RunQueued, RunStarted, SparkProgress

from .conftest import make_app, run, screen_text, settle
from .test_live_events import emit_in_thread
from .test_snapshots import snap

KEY = "ecommerce.silver.clean_orders"
RID = "260301120000beef02"


def started(rid: str = RID) -> list:
    return [RunQueued(rid, KEY, "console"), RunStarted(rid, KEY, f"run-{rid}"),
            PhaseStarted(rid, "branch"), PhaseFinished(rid, "branch", "done", 30),
            PhaseStarted(rid, "config"), PhaseFinished(rid, "config", "done", 20), PhaseStarted(rid, "build")]


def progress(done: int, total: int = 200, stages_done: int = 0, running: int = 2) -> SparkProgress:
    return SparkProgress(RID, jobs_done=1, jobs_running=1, stages_done=stages_done, stages_total=2,
                         tasks_done=done, tasks_running=running, tasks_total=total)


def test_the_running_phase_shows_spark_tasks_and_the_bar_goes_with_the_phase(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=(130, 42)) as pilot:
            await settle(pilot)
            bus = app.controller.engine._bus
            emit_in_thread(bus, started() + [progress(37)])
            await settle(pilot)
            tree = screen_text(app)
            assert "clean_orders" in tree and "18%" in tree  # the tree: the running pipeline's share of tasks
            app.open_run(RID)
            await settle(pilot)
            text = screen_text(app)
            assert "37/200 tasks" in text and "stage 1/2" in text
            emit_in_thread(bus, [progress(150, stages_done=1)])
            await settle(pilot)
            text = screen_text(app)
            assert "150/200 tasks" in text and "stage 2/2" in text
            emit_in_thread(bus, [PhaseFinished(RID, "build", "done", 4000), PhaseStarted(RID, "write")])
            await settle(pilot)
            text = screen_text(app)
            assert "tasks" not in text  # the write phase has no job running yet: no stale bar
            emit_in_thread(bus, [SparkProgress(RID, 2, 0, 0, 0, 0, 0, 0)])  # between jobs
            await settle(pilot)
            assert "tasks" not in screen_text(app)
            assert not app.crashes

    run(go())


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["large", "80x24"])
def test_run_detail_with_spark_progress_snapshot(snap_compare, seeded, size, monkeypatch):
    from ratui.screens.run import RunScreen

    monkeypatch.setattr(RunScreen, "tick", lambda self: None)  # the spinner stays on its first frame

    def live(app):
        emit_in_thread(app.controller.engine._bus, started() + [progress(37)])

    def open_run(app):
        app.open_run(RID)

    assert snap(snap_compare, make_app(seeded), live, open_run, size=size)
