"""Old failures are not shown as current (issue 48): a pipeline fixed back to the version of its last good run shows
that run's state in the tree, its layer counts no failure, Quality counts the failure's results as earlier, and the
line a current failure points at is marked in its SQL. No Spark: the sample project with seeded history; the
versions are the ones the engine records (a run records its pipeline's version at its config phase)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from ratui.engine.facade.engine import Engine
from ratui.engine.run.changes import definition_hashes, version_of
from ratui.engine.run.record import RunRecord
from ratui.engine.state.history import History

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .seed import NS, _phases, seed_history

KEY = f"{NS}.gold.daily_revenue"
GOOD, BROKEN = "260301113000aaaa01", "260301114500bbbb01"


def current_version(root) -> str:
    """The version a run of daily_revenue records today (run/executor.py: at its config phase)."""
    engine = Engine.open(root)
    try:
        return version_of(definition_hashes(engine.compile().pipelines[KEY]))
    finally:
        engine.close()


def seed_break_and_fix(root, broken_version: str) -> None:
    """daily_revenue: a success at today's version, then a failure at another version (its SQL was broken then),
    with a failed quality test and an error at line 3 of its file."""
    version = current_version(root)
    history = History(root / ".ratui" / "ratui.db")
    rows = []
    for run_id, minute, status, ver in ((GOOD, 30, "success", version), (BROKEN, 45, "failed", broken_version)):
        started = datetime(2026, 3, 1, 11, minute, tzinfo=timezone.utc)
        row = {"id": run_id, "pipeline": KEY, "status": status, "trigger": "console", "strategy": "full_refresh",
               "queued_at": started.isoformat(), "started_at": started.isoformat(),
               "finished_at": (started + timedelta(seconds=3)).isoformat(), "duration_ms": 3000,
               "rows_written": 90 if status == "success" else 0, "warnings": 0, "branch": f"run-{run_id}",
               "phases": json.dumps(_phases(status, 3000)), "version": ver}
        if status == "failed":
            row.update(error_code="RAT-SQL-001", error_message="[UNRESOLVED_COLUMN] `amount_x` cannot be resolved",
                       error_hint="Fix the SQL.", error_line=3,
                       error_file=str(root / NS / "pipelines/gold/daily_revenue/pipeline.sql"))
        rows.append(row)
    history.db["runs"].insert_all(rows)
    for run_id, status, violations in ((GOOD, "passed", 0), (BROKEN, "failed", 7)):
        RunRecord(history).add_quality(run_id, {
            "test": "sane_revenue", "severity": "error", "status": status, "violations": violations,
            "duration_ms": 100, "columns": [], "sample": [], "sql": "SELECT 1", "error": None, "file": None,
            "finished_at": "2026-03-01T11:50:00.000Z"})
    history.close()


def pane_text(app, selector: str) -> str:
    """What one pane shows, its lines joined by spaces (a wrapped phrase reads whole)."""
    region = app.screen.query_one(selector).region
    rows = screen_text(app).splitlines()[region.y:region.y + region.height]
    return flat(" ".join(row[region.x:region.x + region.width] for row in rows))


def tree_line(app, name: str) -> str:
    return next(line for line in screen_text(app).splitlines() if f" {name} " in line)


def test_a_pipeline_fixed_back_to_its_last_good_version_shows_that_state(tmp_path):
    root = copy_sample(tmp_path)
    seed_history(root)
    seed_break_and_fix(root, broken_version="0123456789ab")
    app = make_app(root)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: "✔ daily_revenue" in screen_text(app), 30)
            gold = tree_line(app, "gold")
            assert "gold (4)" in gold and "✘" not in gold, gold
            app.screen.select_key(KEY)
            await settle(pilot)
            text = pane_text(app, "#pipeline-detail")
            assert "Last run ✔ success" in text and f"run {GOOD}" in text
            assert f"run {BROKEN} failed on another version" in text
            app.show_pipeline(KEY, "lineage")  # the graph's node says the same
            await wait_for(pilot, lambda: "✔ gold.daily_revenue" in screen_text(app), 30)
            await pilot.press("3")
            await settle(pilot)
            info = screen_text(app).splitlines()[1]
            assert "✘ 1 failed" in info  # clean_orders' failing test of the seeded history: still current
            assert "1 earlier result below" in info, info
            statuses = [str(c) for c in app.screen.table.get_column("status")]
            assert statuses[-1] == "✘ failed"  # the broken run's, last: history

    run(go())


def test_a_failure_of_the_version_it_has_now_is_still_its_state(tmp_path):
    """The same failure, on the version the pipeline has now (the data, not the code): ✘ stays, the layer counts it,
    and the SQL marks the line the error points at."""
    root = copy_sample(tmp_path)
    seed_history(root)
    seed_break_and_fix(root, broken_version=current_version(root))
    app = make_app(root)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: "✘ daily_revenue" in screen_text(app), 30)
            assert "✘ 1" in tree_line(app, "gold")
            app.screen.select_key(KEY)
            await settle(pilot)
            app.screen.query_one("#detail-sql").scroll_visible(top=True, animate=False)
            await settle(pilot)
            text = pane_text(app, "#pipeline-detail")
            assert f"❱ line 3: where run {BROKEN} failed (RAT-SQL-001)" in text, text
            assert "❱ 3 WITH orders AS (" in text, text

    run(go())
