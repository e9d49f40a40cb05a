"""The last runs of every pipeline in one query (the console's tree and sparklines): newest first, finished runs
only, at most `per_pipeline` each, and by index seeks, never a scan of the history."""

from __future__ import annotations

from ratui.engine.state.history import RECENT_STATUSES, History


def _history(tmp_path) -> History:
    history = History(tmp_path / "ratui.db")
    rows = []
    for p in range(3):
        for i in range(6):
            status = ["success", "failed", "cancelled", "running", "pending", "success"][i]
            rows.append({"id": f"r{p}{i}", "pipeline": f"ns.silver.p{p}", "status": status, "trigger": "manual",
                         "started_at": f"2026-01-0{i + 1}T00:00:00.000Z", "duration_ms": 1000 * (i + 1),
                         "rows_written": i, "warnings": 0})
    history.db["runs"].insert_all(rows)
    return history


def test_newest_finished_runs_of_each_pipeline(tmp_path):
    history = _history(tmp_path)
    recent = history.recent_by_pipeline(3)
    assert sorted(recent) == ["ns.silver.p0", "ns.silver.p1", "ns.silver.p2"]
    # r?3 running and r?4 pending are left out; newest first
    assert [r["id"] for r in recent["ns.silver.p1"]] == ["r15", "r12", "r11"]
    assert recent["ns.silver.p1"][0] == {"pipeline": "ns.silver.p1", "id": "r15", "status": "success",
                                         "duration_ms": 6000, "started_at": "2026-01-06T00:00:00.000Z",
                                         "rows_written": 5, "warnings": 0, "version": None, "ref": None,
                                         "error_code": None, "error_file": None, "error_line": None}  # the tree's
    only = history.recent_by_pipeline(10, ["ns.silver.p2", "ns.gold.none"])
    assert list(only) == ["ns.silver.p2"] and len(only["ns.silver.p2"]) == 4
    assert history.recent_by_pipeline(10, []) == {}


def test_every_pipeline_by_index_seeks(tmp_path):
    history = _history(tmp_path)
    statements: list[str] = []
    history._conn.set_trace_callback(statements.append)
    history.recent_by_pipeline(12)
    history._conn.set_trace_callback(None)
    statements = [s for s in statements if not s.startswith(("SAVEPOINT", "RELEASE"))]  # sqlite-utils' own
    assert len(statements) == 1
    plan = " / ".join(row[3] for row in history._conn.execute("EXPLAIN QUERY PLAN " + statements[0].replace(
        "LIMIT 12", "LIMIT ?"), [12]))
    assert "idx_runs_pipeline_started_at (pipeline=?)" in plan and "idx_runs_pipeline_started_at (pipeline>?)" in plan
    assert "SCAN runs" not in plan, plan
    assert RECENT_STATUSES in statements[0]
