"""A run's data diff in the console: its section in Run detail (shown only when the run has a diff) and the Data diff
section of Compare (Runs: c). The seeded history holds two runs of silver.clean_orders with diffs, the newer failed
by its diff gate (RAT-RUN-009); snapshots at 120x40 and 80x24, and a pilot test of what the screens say."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from ratui.engine.run.data_diff_model import ColumnDiff, DataDiff
from ratui.engine.state.history import History
from ratui.screens.compare import CompareScreen

from .conftest import copy_sample, flat, make_app, run, screen_text, settle
from .seed import NS, _phases, seed_history

OLDER = "260301120000d1ff01"
NEWER = "260301123000d1ff02"
KEY = f"{NS}.silver.clean_orders"


def diff(rows_before, rows_after, added, removed, changed, nulls, total, failed=(), passed=()) -> dict:
    d = DataDiff(KEY, "spark", ["order_id"], rows_before, rows_after, added, removed, changed,
                 columns=[ColumnDiff("order_id", "long", 0, 0, rows_before, rows_after, 61000, 65123),
                          ColumnDiff("email", "string", 12, nulls, 980, 1010),
                          ColumnDiff("amount", "decimal(12, 2)", 0, 0, 700, 731, "45210.50", total)],
                 schema_changes=["added column email string"] if failed else [],
                 samples={"added": [{"order_id": 12001 + i} for i in range(added and 3)],
                          "removed": [{"order_id": 17}] if removed else [],
                          "changed": [{"order_id": 88}, {"order_id": 312}] if changed else []})
    d.gate = {"failed": list(failed), "passed": list(passed)}
    return d.to_dict()


def seed_diffs(root) -> None:
    history = History(root / ".ratui" / "ratui.db")
    rows = []
    for run_id, minute, status, d in (
            (OLDER, 0, "success", diff(12000, 12010, 10, 0, 4, 12, "45390.10",
                                       passed=["max_row_change 20%: added + removed + changed 14 = 0.1% of 12,000 "
                                               "rows"])),
            (NEWER, 30, "failed", diff(12010, 12300, 300, 1, 2900, 400, "51002.75",
                                       failed=["max_row_change 20%: added + removed + changed 3,201 = 26.7% of "
                                               "12,010 rows"]))):
        started = datetime(2026, 3, 1, 12, minute, tzinfo=timezone.utc)
        row = {"id": run_id, "pipeline": KEY, "status": status, "trigger": "cli", "strategy": "incremental",
               "queued_at": started.isoformat(), "started_at": started.isoformat(),
               "finished_at": (started + timedelta(seconds=9)).isoformat(), "duration_ms": 9000,
               "rows_written": 12010 if status == "success" else 0, "warnings": 0, "branch": f"run-{run_id}",
               "phases": json.dumps(_phases(status, 9000)), "diff": json.dumps(d)}
        if status == "failed":
            row.update(error_code="RAT-RUN-009", error_message=f"data diff gate failed for {KEY}: "
                       + d["gate"]["failed"][0], error_hint="main is unchanged.",
                       error_file=str(root / NS / "pipelines/silver/clean_orders/pipeline.sql"), error_line=4)
        rows.append(row)
    history.db["runs"].insert_all(rows)
    history.close()


@pytest.fixture(scope="module")
def diffed(tmp_path_factory):
    root = copy_sample(tmp_path_factory.mktemp("diffed"))
    seed_history(root)
    seed_diffs(root)
    return root


def test_run_detail_and_compare_tell_the_diff(diffed):
    app = make_app(diffed)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            app.open_run(NEWER)
            await settle(pilot)
            text = flat(screen_text(app))
            assert "Data diff" in text and "12,010 -> 12,300 rows" in text
            assert "+300 added -1 removed ~2,900 changed" in text
            assert "✗ max_row_change 20%" in text and "RAT-RUN-009" in text
            assert "email 12 -> 400" in text  # NULLs before -> after
            app.open_run(OLDER)
            await settle(pilot)
            await pilot.press("2")
            await settle(pilot)
            screen = app.screen
            screen.table.move_cursor(row=screen.table.get_row_index(NEWER))
            await pilot.press("c")
            await settle(pilot)
            assert isinstance(app.screen, CompareScreen)
            assert "Data diff" in screen_text(app)
            rows = {r.label: (r.a, r.b, r.change, r.tone) for r in app.screen.comparison.section("Data diff").rows}
            assert rows["rows changed"] == ("4", "2,900", "+2,896", "changed")
            assert rows["gate"] == ("passed (1)", "failed (1)", "changed", "worse")
            assert rows["email: NULLs"] == ("12", "400", "+388", "worse")
            assert rows["amount: sum"][:2] == ("45390.10", "51002.75")
            assert not app.crashes

    run(go())


def test_a_run_without_a_diff_shows_no_diff_section(diffed):
    from .seed import SUCCESS_RUN

    app = make_app(diffed)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            app.open_run(SUCCESS_RUN)
            await settle(pilot)
            assert "Data diff" not in screen_text(app)

    run(go())


WHOLE = "260301130000d1ff03"  # a run of gold.daily_revenue that added a column; the table has no unique key


@pytest.fixture
def added_column(tmp_path):
    """The sample with one run whose diff compared rows whole (no key) across an added column: every row differs."""
    root = copy_sample(tmp_path)
    seed_history(root)
    key = f"{NS}.gold.daily_revenue"
    d = DataDiff(key, "spark", [], 720, 720, 720, 720, None,
                 columns=[ColumnDiff("revenue", "decimal(14, 2)", 0, 0, 700, 700, "14424144.75", "14424144.75"),
                          ColumnDiff("avg_order_value", "double", None, 0, None, 690, None, 30419.5)],
                 schema_changes=["added column avg_order_value double"])
    started = datetime(2026, 3, 1, 13, 0, tzinfo=timezone.utc)
    history = History(root / ".ratui" / "ratui.db")
    history.db["runs"].insert({
        "id": WHOLE, "pipeline": key, "status": "success", "trigger": "cli", "strategy": "full_refresh",
        "queued_at": started.isoformat(), "started_at": started.isoformat(),
        "finished_at": (started + timedelta(seconds=9)).isoformat(), "duration_ms": 9000, "rows_written": 720,
        "warnings": 0, "branch": f"run-{WHOLE}", "phases": json.dumps(_phases("success", 9000)),
        "diff": json.dumps(d.to_dict())})
    history.close()
    return root


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "large"])
def test_an_added_column_reads_as_changed_rows_and_numbers_as_the_counts(added_column, size):
    """Not '+720 added -720 removed' for a column added to a table without a key; a sum with separators, as the
    counts beside it (14,424,144.75, not 14424144.75)."""
    app = make_app(added_column)

    async def go():
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            app.open_run(WHOLE)
            await settle(pilot)
            app.screen.query_one("#run-left").focus()
            await pilot.press("end")
            await settle(pilot)
            text = flat(screen_text(app))
            assert "~720 rows changed: added column avg_order_value double" in text
            assert "+720 added" not in text and "-720 removed" not in text
            assert "14,424,144.75" in text and "14424144.75" not in text

    run(go())


def snap(snap_compare, app, *steps, size):
    from .test_snapshots import snap as take

    return take(snap_compare, app, *steps, size=size)


def test_run_detail_diff_snapshot(snap_compare, diffed):
    assert snap(snap_compare, make_app(diffed), lambda app: app.open_run(NEWER), size=(120, 40))


def test_run_detail_diff_snapshot_80x24(snap_compare, diffed):
    """The compact layout's left pane scrolled to the diff."""
    assert snap(snap_compare, make_app(diffed), lambda app: app.open_run(NEWER),
                lambda app: app.screen.query_one("#run-diff-label").scroll_visible(top=True, animate=False),
                size=(80, 24))


def test_compare_diff_snapshot(snap_compare, diffed):
    """The newest run (NEWER, top of Runs) against the run of its pipeline before it (OLDER)."""
    assert snap(snap_compare, make_app(diffed), ("2",), ("c",), ("pagedown",), size=(120, 40))


def test_compare_diff_snapshot_80x24(snap_compare, diffed):
    assert snap(snap_compare, make_app(diffed), ("2",), ("c",), ("pagedown", "pagedown"), size=(80, 24))
