"""The reaper on a real SQLite file and real Iceberg files: every task found and removed, dry runs that list
exactly what the real run then removes, and the orphan-file sweep that never deletes a file a live ref reaches.

Ages are simulated (file mtimes with os.utime, old timestamps written into SQLite rows), never slept for.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from ratui.cli import main
from ratui.engine.state.catalog.base import MAIN
from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.project.settings import load_settings
from ratui.engine.write.files import table_location
from ratui.engine.run.record import RunRecord

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


# ------------------------------------------------------------------------------------------------ helpers


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ago(**delta) -> str:
    return iso(datetime.now(timezone.utc) - timedelta(**delta))


def age(path: Path, hours: float) -> None:
    t = time.time() - hours * 3600
    os.utime(path, (t, t))


def age_tree(folder: Path, hours: float) -> None:
    for p in Path(folder).rglob("*"):
        if p.is_file():
            age(p, hours)


def files_under(folder: Path) -> set[str]:
    return {str(p) for p in Path(folder).rglob("*") if p.is_file()}


def project(root: Path, reaper: str = "") -> Engine:
    """A small project (no Spark needed) with optional `reaper:` settings."""
    (root / "demo/pipelines/bronze/items").mkdir(parents=True, exist_ok=True)
    (root / "demo/pipelines/bronze/items/pipeline.sql").write_text("SELECT 1 AS id\n")
    (root / "ratui.yaml").write_text("namespace: demo\n" + (f"reaper:\n{reaper}" if reaper else ""))
    return Engine.open(root)


def add_run(engine: Engine, run_id: str, pipeline: str, status: str, *, started: str | None = None,
            finished: str | None = None, pid: int | None = 1, host: str | None = "elsewhere") -> None:
    RunRecord(engine.state.history).create(run_id, pipeline, "test", "full_refresh", None)
    RunRecord(engine.state.history).update(run_id, status=status, started_at=started, finished_at=finished,
                              branch=f"run-{run_id}", pid=pid, host=host)


def set_ref_created(engine: Engine, ref: str, created_at: str) -> None:
    with closing(sqlite3.connect(engine.settings.db_path)) as conn, conn:
        conn.execute("UPDATE catalog_refs SET created_at = ? WHERE name = ?", (created_at, ref))


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "v": [f"v{i}" for i in range(start, start + n)]},
                    schema=SCHEMA)


def age_catalog(engine: Engine, **delta) -> None:
    """Every time the catalog recorded (commits, refs, branch deletions) moved back by `delta`: as if it all
    happened that long ago."""
    shift = timedelta(**delta)
    with closing(sqlite3.connect(engine.settings.db_path)) as conn, conn:
        for table, column, key in (("catalog_commits", "created_at", "hash"), ("catalog_refs", "created_at", "name"),
                                   ("catalog_deleted_refs", "deleted_at", "rowid")):
            for row_key, at in conn.execute(f"SELECT {key}, {column} FROM {table}").fetchall():
                moved = (datetime.fromisoformat(at) - shift).isoformat(timespec="microseconds")
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (moved, row_key))


def create_table(engine: Engine, key: str, ref: str = MAIN):
    return engine.state.catalog.create_table(ref, key, SCHEMA, table_location(engine.root, key))


def reachable_oracle(engine: Engine) -> set[str]:
    """Every file a live ref reaches, computed through PyIceberg's inspect tables (not the reaper's marker)."""
    out: set[str] = set()
    for ref in engine.state.catalog.list_refs():
        for key in engine.state.catalog.table_pointers(ref.name):
            table = engine.state.catalog.load_table(ref.name, key)
            out.add(table.metadata_location)
            out.update(e.metadata_file for e in table.metadata.metadata_log)
            out.update(s.manifest_list for s in table.metadata.snapshots)
            if table.metadata.snapshots:
                out.update(table.inspect.all_manifests().column("path").to_pylist())
                out.update(table.inspect.all_files().column("file_path").to_pylist())
    return {os.path.realpath(p.removeprefix("file://")) for p in out}


def names(items) -> list[str]:
    return sorted(i["name"] for i in items)


# ----------------------------------------------------------------------------------------------- settings


def test_settings_defaults_and_validation(tmp_path):
    (tmp_path / "ratui.yaml").write_text("namespace: demo\n")
    s = load_settings(tmp_path)
    assert (s.reaper_stuck_run_timeout_minutes, s.reaper_orphan_branch_max_age_hours, s.reaper_processed_max_age_days,
            s.reaper_snapshot_max_age_days, s.reaper_orphan_file_max_age_hours,
            s.reaper_run_history_keep_per_pipeline, s.reaper_run_history_max_age_days,
            s.reaper_interval_minutes) == (30, 6, 7, 7, 24, 1000, 90, 60)
    (tmp_path / "ratui.yaml").write_text(
        "namespace: demo\nreaper:\n  interval_minutes: 5\n  snapshot_max_age_days: 0\n")
    s = load_settings(tmp_path)
    assert s.reaper_interval_minutes == 5 and s.reaper_snapshot_max_age_days == 0
    for bad, text in [("orphan_file_max_age_hours: 0", ">= 1"), ("stuck_run_timeout: 5", "stuck_run_timeout_minutes"),
                      ("interval_minutes: soon", "integer")]:
        (tmp_path / "ratui.yaml").write_text(f"namespace: demo\nreaper:\n  {bad}\n")
        with pytest.raises(RatuiError) as err:
            load_settings(tmp_path)
        assert err.value.code == "RAT-CFG-007" and text in str(err.value) + (err.value.hint or "")


# ---------------------------------------------------------------------------------------------- stuck runs


def test_stuck_runs_are_failed_and_ours_are_cancelled(tmp_path):
    engine = project(tmp_path)
    key = "demo.bronze.items"
    add_run(engine, "stuckother", key, "running", started=ago(minutes=45))
    add_run(engine, "stuckmine", key, "running", started=ago(hours=2), pid=os.getpid(), host=socket.gethostname())
    add_run(engine, "fresh", key, "running", started=ago(minutes=10))
    add_run(engine, "oldpending", key, "pending")
    cancelled, real_cancel = [], engine._in_flight.cancel  # the reaper interrupts this process's runs through it

    def spy(run_id, error=None):
        cancelled.append((run_id, engine.state.history.get_run(run_id)["status"]))
        assert error is not None and error.code == "RAT-RUN-007"  # the run keeps the timeout's code
        return real_cancel(run_id, error=error)

    engine._in_flight.cancel = spy

    dry = engine.reaper().run(dry_run=True, tasks=["stuck_runs"])
    found = dry.tasks["stuck_runs"].found
    assert names(found) == ["stuckmine", "stuckother"]
    assert {i["name"]: i["this_process"] for i in found} == {"stuckmine": True, "stuckother": False}
    assert dry.tasks["stuck_runs"].removed == [] and cancelled == []
    assert engine.state.history.get_run("stuckother")["status"] == "running"

    real = engine.reaper().run(tasks=["stuck_runs"])
    assert names(real.tasks["stuck_runs"].removed) == names(found)
    assert cancelled == [("stuckmine", "running")]  # interrupted while still running, then failed
    assert {i["name"]: i.get("cancel") for i in real.tasks["stuck_runs"].removed} == {
        "stuckmine": "requested", "stuckother": None}
    assert engine.state.history.cancel_requested(["stuckmine", "stuckother"]) == ["stuckmine"]
    for run_id in ("stuckother", "stuckmine"):
        run = engine.state.history.get_run(run_id)
        assert run["status"] == "failed" and run["error_code"] == "RAT-RUN-007" and run["finished_at"]
        assert any("RAT-RUN-007" in line["message"] for line in run["logs"])
    assert engine.state.history.get_run("fresh")["status"] == "running"
    assert engine.state.history.get_run("oldpending")["status"] == "pending"


# ----------------------------------------------------------------------------------------- orphan branches


def test_orphan_branches_never_the_branch_of_a_running_run(tmp_path):
    engine = project(tmp_path)
    key = "demo.bronze.items"
    add_run(engine, "done", key, "failed", started=ago(hours=10), finished=ago(hours=10))
    add_run(engine, "going", key, "running", started=ago(minutes=5))      # its branch is old: still never
    add_run(engine, "young", key, "success", started=ago(hours=1), finished=ago(hours=1))
    add_run(engine, "hung", key, "running", started=ago(hours=9))         # stuck: timed out in the same pass
    add_run(engine, "waiting", key, "pending")
    for run_id in ("done", "going", "young", "hung", "waiting", "norecord"):
        engine.state.catalog.create_branch(f"run-{run_id}", run_id=run_id)
    engine.state.catalog.create_branch("feature")
    for ref, hours in [("run-done", 10), ("run-going", 10), ("run-young", 1), ("run-hung", 9), ("run-waiting", 8),
                       ("run-norecord", 7), ("feature", 100)]:
        set_ref_created(engine, ref, ago(hours=hours))

    dry = engine.reaper().run(dry_run=True, tasks=["stuck_runs", "orphan_branches"])
    task = dry.tasks["orphan_branches"]
    assert names(task.found) == ["run-done", "run-hung", "run-norecord"]
    assert {i["name"]: i["reason"] for i in task.kept} == {"run-going": "its run is still running",
                                                           "run-waiting": "its run is still pending"}
    assert len(engine.state.catalog.list_refs()) == 8  # nothing removed

    real = engine.reaper().run(tasks=["stuck_runs", "orphan_branches"])
    assert names(real.tasks["orphan_branches"].removed) == names(task.found)
    assert sorted(r.name for r in engine.state.catalog.list_refs()) == ["feature", "main", "run-going", "run-waiting",
                                                                  "run-young"]


# --------------------------------------------------------------------------------------------- run history


def test_run_history_retention(tmp_path):
    engine = project(tmp_path, "  run_history_keep_per_pipeline: 2\n  run_history_max_age_days: 90\n")
    old = lambda i: ago(days=200 - i)  # noqa: E731
    # p1: five old runs; the newest two are kept by count, the rest are deleted
    for i, status in enumerate(["success", "failed", "cancelled", "success", "failed"]):
        add_run(engine, f"p1r{i}", "demo.bronze.p1", status, started=old(i), finished=old(i))
    # p2: old runs beyond the count, but their newest success is what change detection reads: kept
    add_run(engine, "p2ok", "demo.bronze.p2", "success", started=old(0), finished=old(0))
    for i in range(1, 4):
        add_run(engine, f"p2f{i}", "demo.bronze.p2", "failed", started=old(i), finished=old(i))
    # p3: many young runs: kept by age
    for i in range(5):
        add_run(engine, f"p3r{i}", "demo.bronze.p3", "failed", started=ago(days=10 + i), finished=ago(days=10 + i))
    # p4: an old run still "running" is never deleted (the stuck-run task is not part of this pass)
    add_run(engine, "p4old", "demo.bronze.p4", "running", started=old(0))
    for i in range(3):
        add_run(engine, f"p4r{i}", "demo.bronze.p4", "failed", started=old(i + 1), finished=old(i + 1))
    for run_id in ("p1r0", "p1r1", "p3r4"):
        RunRecord(engine.state.history).log(run_id, "info", "hello")
        RunRecord(engine.state.history).add_quality(run_id, {"test": "t", "severity": "error", "status": "passed",
                                                             "violations": 0})

    dry = engine.reaper().run(dry_run=True, tasks=["run_history"])
    task = dry.tasks["run_history"]
    assert names(task.found) == ["p1r0", "p1r1", "p1r2", "p2f1", "p4r0"]
    assert names(task.kept) == ["p2ok"]
    assert engine.state.history.count_runs() == 18

    real = engine.reaper().run(tasks=["run_history"])
    assert names(real.tasks["run_history"].removed) == names(task.found)
    left = {r["id"] for r in engine.state.history.list_runs(100)}
    assert left.isdisjoint(names(task.found)) and len(left) == 13
    assert {"p2ok", "p4old", "p3r4"} <= left
    with closing(sqlite3.connect(engine.settings.db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM run_logs WHERE run_id IN ('p1r0', 'p1r1')").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM quality_results WHERE run_id IN ('p1r0', 'p1r1')").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM run_logs WHERE run_id = 'p3r4'").fetchone()[0] == 1
    assert engine.state.history.last_success("demo.bronze.p2")["id"] == "p2ok"


def test_a_pass_over_a_long_history_stores_a_bounded_report_with_whole_counts(tmp_path, capsys):
    """A first pass over a long history finds hundreds of thousands of old runs (851,500 of a million): the pass
    removes them all, its stored report keeps the first STORED_ITEMS of each list (it was 142 MB) and the whole
    counts, which the report's readers, `ratui reap` and the Reaper screen's history, show."""
    from ratui.engine.ops.reaper_report import STORED_ITEMS

    engine = project(tmp_path, "  run_history_keep_per_pipeline: 1\n  run_history_max_age_days: 90\n")
    n = STORED_ITEMS + 250
    engine.state.history.db["runs"].insert_all(
        {"id": f"old{i:05d}", "pipeline": "demo.bronze.p1", "status": "failed", "trigger": "test",
         "queued_at": ago(days=400 - i / 10), "started_at": ago(days=400 - i / 10),
         "finished_at": ago(days=400 - i / 10), "duration_ms": 1, "rows_written": 0, "warnings": 0}
        for i in range(n))
    dry = engine.reaper().run(dry_run=True, tasks=["run_history"])
    assert dry.found == n - 1 and len(dry.tasks["run_history"].found) == n - 1  # in memory: every one
    stored = engine.reaper().report(dry.id)
    task = stored.tasks["run_history"]
    assert len(task.found) == STORED_ITEMS and task.count("found") == n - 1 and stored.found == n - 1
    assert names(task.found) == [f"old{i:05d}" for i in range(STORED_ITEMS)]  # the oldest first

    assert main(["reap", "--project", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{n - 1:>5} found, {n - 1:>5} removed" in out and f"... and {n - 1 - 10:,} more" in out
    assert engine.state.history.count_runs() == 1
    real = engine.reaper().reports(1)[0]
    assert real.removed == n - 1 and real.tasks["run_history"].count("removed") == n - 1
    assert len(real.tasks["run_history"].removed) == STORED_ITEMS


# ---------------------------------------------------------------------------------------- processed files


def test_processed_landing_files(tmp_path):
    engine = project(tmp_path, "  processed_max_age_days: 7\n")
    zone = tmp_path / "demo/landing/orders"
    other = tmp_path / "demo/landing/customers"
    layout = {  # path -> age in days
        zone / "_processed/r1/a.csv": 10, zone / "_processed/r1/b.csv": 9, zone / "_processed/r2/c.csv": 1,
        zone / "_processed/r3/d.csv": 30,  # its run archived it yesterday: 1 day old as an archive
        zone / "new.csv": 30,  # an active landing file: never touched
        other / "_processed/r4/x.csv": 20, other / "_processed/r5/y.csv": 10,  # y: newest of its zone, kept
    }
    for path, days in layout.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("id\n1\n")
        age(path, days * 24)
    add_run(engine, "r3", "demo.bronze.items", "success", started=ago(days=1, minutes=1), finished=ago(days=1))

    dry = engine.reaper().run(dry_run=True, tasks=["processed_files"])
    task = dry.tasks["processed_files"]
    expected = ["demo/landing/customers/_processed/r4/x.csv", "demo/landing/orders/_processed/r1/a.csv",
                "demo/landing/orders/_processed/r1/b.csv"]
    assert names(task.found) == expected and task.bytes_found == 15
    assert names(task.kept) == ["demo/landing/customers/_processed/r5/y.csv"]
    assert all(p.exists() for p in layout)

    real = engine.reaper().run(tasks=["processed_files"])
    assert names(real.tasks["processed_files"].removed) == expected
    assert real.tasks["processed_files"].bytes_freed == 15
    assert sorted(str(p.relative_to(tmp_path)) for p in layout if p.exists()) == [
        "demo/landing/customers/_processed/r5/y.csv", "demo/landing/orders/_processed/r2/c.csv",
        "demo/landing/orders/_processed/r3/d.csv", "demo/landing/orders/new.csv"]
    assert not (zone / "_processed/r1").exists() and not (other / "_processed/r4").exists()  # empty dirs removed
    assert (zone / "_processed").is_dir()


# ------------------------------------------------------------------------------ orphan files, live branch


def test_orphan_sweep_spares_every_file_a_live_branch_reaches(tmp_path):
    engine = project(tmp_path, "  orphan_file_max_age_hours: 24\n")
    key = "demo.bronze.items"
    create_table(engine, key).append(rows(3))
    engine.state.catalog.load_table(MAIN, key).append(rows(2, 10))
    engine.state.catalog.create_branch("feature")
    for i in range(2):
        engine.state.catalog.load_table("feature", key).append(rows(1, 100 + i))
    engine.state.catalog.load_table(MAIN, key).overwrite(rows(4, 50))  # main replaces everything
    feature_files = reachable_oracle(engine)
    table_dir = tmp_path / "demo/warehouse/bronze/items"
    junk = [table_dir / "data/junk-1.parquet", table_dir / "metadata/99999-junk.metadata.json",
            tmp_path / "demo/warehouse/bronze/dropped/data/old.parquet"]
    for path in junk:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)
    young = table_dir / "data/junk-young.parquet"
    young.write_bytes(b"y")
    # an uncommitted write of a run still going: protected whatever its age
    add_run(engine, "livewrite", key, "running", started=ago(minutes=5))
    in_flight = table_dir / "data/run-livewrite-0a1b2c3d/part-0.parquet"
    in_flight.parent.mkdir(parents=True)
    in_flight.write_bytes(b"z")
    # staging: the live run's folder is spared, a dead run's leftovers go
    live_staging = tmp_path / ".ratui/staging/livewrite/result/part-0.parquet"
    dead_staging = tmp_path / ".ratui/staging/deadrun/result/part-0.parquet"
    for path in (live_staging, dead_staging):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"s" * 5)
        age(path, 48)
    junk.append(dead_staging)
    age_tree(tmp_path / "demo/warehouse", 48)
    age(young, 1)

    dry = engine.reaper().run(dry_run=True, tasks=["orphan_files"])
    task = dry.tasks["orphan_files"]
    assert names(task.found) == sorted(str(p.relative_to(tmp_path)) for p in junk)
    assert task.stats["young_unreachable"] == 1 and task.stats["protected_live_run"] == 2
    assert all(p.exists() for p in junk)

    real = engine.reaper().run(tasks=["orphan_files"])
    assert names(real.tasks["orphan_files"].removed) == names(task.found)
    assert real.tasks["orphan_files"].bytes_freed == 35
    assert not any(p.exists() for p in junk) and young.exists() and in_flight.exists() and live_staging.exists()
    assert not (tmp_path / ".ratui/staging/deadrun").exists() and (tmp_path / ".ratui/staging").is_dir()
    assert all(os.path.exists(p) for p in feature_files)
    assert engine.state.catalog.load_table("feature", key).scan().to_arrow().num_rows == 7
    assert engine.state.catalog.load_table(MAIN, key).scan().to_arrow().num_rows == 4

    # the branch goes: what only it reached stays while the deletion is inside the retention window (undoing
    # it needs them); the finished run's write is swept
    RunRecord(engine.state.history).update("livewrite", status="failed", finished_at=ago(minutes=1))
    only_feature = feature_files - reachable_oracle_after_delete(engine, "feature")
    assert only_feature
    after = engine.reaper().run(tasks=["orphan_files"])
    removed = {os.path.realpath(tmp_path / i["path"]) for i in after.tasks["orphan_files"].removed}
    assert removed == {os.path.realpath(in_flight), os.path.realpath(live_staging)}
    assert all(os.path.exists(p) for p in only_feature)
    # once the window has passed the deletion, what only the branch reached goes too, main stays whole
    age_catalog(engine, days=8)
    later = engine.reaper().run(tasks=["orphan_files"])
    removed = {os.path.realpath(tmp_path / i["path"]) for i in later.tasks["orphan_files"].removed}
    assert removed == only_feature
    assert {i["kind"] for i in later.tasks["orphan_files"].removed} == {"deleted_branch"}
    assert engine.state.catalog.load_table(MAIN, key).scan().to_arrow().num_rows == 4
    assert all(os.path.exists(p) for p in reachable_oracle(engine))


def reachable_oracle_after_delete(engine: Engine, branch: str) -> set[str]:
    engine.state.catalog.delete_branch(branch)
    return reachable_oracle(engine)


# ------------------------------------------------------------------ dry run = real run, failures, reports


def test_dry_run_removes_nothing_and_lists_what_the_real_run_removes(tmp_path):
    engine = project(tmp_path, "  snapshot_max_age_days: 0\n  run_history_keep_per_pipeline: 0\n")
    key, other = "demo.bronze.items", "demo.bronze.other"
    create_table(engine, key).append(rows(2))
    engine.state.catalog.load_table(MAIN, key).overwrite(rows(3, 10))
    create_table(engine, other).append(rows(1))
    # an old run branch that wrote its own snapshot, then its run failed: branch and its files go
    add_run(engine, "gone", key, "failed", started=ago(days=100), finished=ago(days=100))
    engine.state.catalog.create_branch("run-gone", run_id="gone")
    engine.state.catalog.load_table("run-gone", key).append(rows(5, 100))
    set_ref_created(engine, "run-gone", ago(days=100))
    # a run of `other` in progress: its table's snapshots wait for the next pass
    add_run(engine, "busy", other, "running", started=ago(minutes=1))
    engine.state.catalog.load_table(MAIN, other).append(rows(1, 7))
    stray = tmp_path / "demo/landing/z/_processed/gone/f.csv"
    stray.parent.mkdir(parents=True)
    stray.write_text("a\n")
    (stray.parent.parent / "keep/k.csv").parent.mkdir()
    (stray.parent.parent / "keep/k.csv").write_text("b\n")
    age(stray, 24 * 30)
    age(stray.parent.parent / "keep/k.csv", 24 * 20)
    age_tree(tmp_path / "demo/warehouse", 72)

    def state():
        with closing(sqlite3.connect(engine.settings.db_path)) as conn:
            db = [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                  for t in ("runs", "iceberg_tables", "catalog_refs")]
        return files_under(tmp_path / "demo"), db

    before = state()
    dry = engine.reaper().run(dry_run=True)
    assert state() == before
    assert dry.ok and dry.removed == 0 and dry.bytes_freed == 0 and dry.found > 0
    found = {name: names(t.found) for name, t in dry.tasks.items()}
    assert found["orphan_branches"] == ["run-gone"] and found["run_history"] == ["gone"]
    assert found["processed_files"] == ["demo/landing/z/_processed/gone/f.csv"]
    assert {i["table"] for i in dry.tasks["snapshots"].found} == {key}
    assert {i["table"] for i in dry.tasks["snapshots"].kept} == {other}
    # the branch this pass deletes is deleted inside the retention window: it keeps what it reaches (its own
    # snapshot and the one expired on main) until the window has passed the deletion
    assert found["orphan_files"] == []

    real = engine.reaper().run()
    assert real.ok
    assert {name: names(t.removed) for name, t in real.tasks.items()} == found
    assert real.bytes_freed == dry.bytes_found
    assert all(os.path.exists(p) for p in reachable_oracle(engine))
    assert engine.state.catalog.load_table(MAIN, key).scan().to_arrow().num_rows == 3
    assert len(engine.state.catalog.load_table(MAIN, key).metadata.snapshots) == 1
    assert engine.state.catalog.log(MAIN, 5)[0].message.startswith("reaper: expired")
    # the window is 0 days: the next pass frees the deleted branch's files and the expired snapshot's
    nxt = engine.reaper().run(tasks=["orphan_files"])
    freed = nxt.tasks["orphan_files"].removed
    assert nxt.ok and any(i["name"].endswith(".parquet") for i in freed)
    assert {i["kind"] for i in freed} <= {"deleted_branch", "orphan"} and "deleted_branch" in {i["kind"] for i in freed}
    assert all(os.path.exists(p) for p in reachable_oracle(engine))
    assert engine.state.catalog.load_table(MAIN, key).scan().to_arrow().num_rows == 3
    # and a further pass finds nothing more to do
    again = engine.reaper().run(dry_run=True)
    assert {n: t.found for n, t in again.tasks.items() if n != "snapshots"} == {
        n: [] for n in again.tasks if n != "snapshots"}


def test_one_failing_task_does_not_stop_the_others_and_reports_are_stored(tmp_path):
    engine = project(tmp_path)
    key = "demo.bronze.items"
    create_table(engine, key).append(rows(2))
    engine.state.catalog.create_branch("broken")
    with closing(sqlite3.connect(engine.settings.db_path)) as conn, conn:
        conn.execute("UPDATE iceberg_tables SET metadata_location = ? WHERE catalog_name = 'broken'",
                     (str(tmp_path / "demo/warehouse/bronze/items/metadata/missing.metadata.json"),))
    junk = tmp_path / "demo/warehouse/bronze/items/data/junk.parquet"
    junk.write_bytes(b"j")
    age_tree(tmp_path / "demo/warehouse", 100)
    add_run(engine, "stuck", key, "running", started=ago(hours=3))

    report = engine.reaper().run()
    assert not report.ok
    assert report.tasks["orphan_files"].error["code"] == "RAT-RPR-002"
    assert report.tasks["orphan_files"].removed == [] and junk.exists()  # unknown reachability: nothing deleted
    assert names(report.tasks["stuck_runs"].removed) == ["stuck"]  # the others still ran
    assert [n for n, t in report.tasks.items() if t.error] == ["orphan_files"]

    dry = engine.reaper().run(dry_run=True)
    stored = engine.reaper().reports(5)
    assert [r.id for r in stored] == [dry.id, report.id] and [r.dry_run for r in stored] == [True, False]
    assert stored[1].to_dict() == report.to_dict()
    assert stored[1].tasks["orphan_files"].error["code"] == "RAT-RPR-002"
    assert engine.reaper().report(report.id).tasks["stuck_runs"].removed[0]["run_id"] == "stuck"


def test_cli_reap(tmp_path, capsys):
    engine = project(tmp_path, "  orphan_file_max_age_hours: 1\n")
    junk = tmp_path / "demo/warehouse/bronze/items/data/junk.parquet"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"0123456789")
    age(junk, 2)
    engine.close()

    assert main(["reap", "--project", str(tmp_path), "--dry-run", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["dry_run"] and body["tasks"]["orphan_files"]["found"][0]["name"] == \
        "demo/warehouse/bronze/items/data/junk.parquet"
    assert body["bytes_found"] == 10 and body["bytes_freed"] == 0 and junk.exists()

    assert main(["reap", "--project", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "orphan files" in out and "1 removed" in out and "10 B freed" in out and "stuck runs" in out
    assert not junk.exists()


# ------------------------------------------------------------------------------- real pipeline runs


def test_real_runs_then_expiry_and_sweep_keep_main_whole(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/items/pipeline.sql": "SELECT id, concat('v', id) AS v FROM range(5)\n",
    })
    with open(root / "ratui.yaml", "a") as f:
        f.write("reaper:\n  snapshot_max_age_days: 0\n")
    engine = Engine.open(root)
    keys = engine.compile().select(["items"])
    for _ in range(3):
        assert [r.status for r in engine.run(keys, force=True)] == ["success"]
    key = keys[0]
    before = engine.state.catalog.load_table(MAIN, key)
    assert len(before.metadata.snapshots) > 1
    age_tree(root / "demo/warehouse", 48)

    dry = engine.reaper().run(dry_run=True, tasks=["snapshots", "orphan_files"])
    assert dry.ok and len(dry.tasks["snapshots"].found) == len(before.metadata.snapshots) - 1
    orphan_names = names(dry.tasks["orphan_files"].found)
    assert orphan_names and any(n.endswith(".parquet") for n in orphan_names)

    real = engine.reaper().run(tasks=["snapshots", "orphan_files"])
    assert real.ok and names(real.tasks["orphan_files"].removed) == orphan_names
    after = engine.state.catalog.load_table(MAIN, key)
    assert [s.snapshot_id for s in after.metadata.snapshots] == [before.metadata.current_snapshot_id]
    assert after.scan().to_arrow().sort_by("id").column("id").to_pylist() == list(range(5))
    assert all(os.path.exists(p) for p in reachable_oracle(engine))
    # the table still takes runs after the reaper
    assert [r.status for r in engine.run(keys, force=True)] == ["success"]


# ---------------------------------------------------------------------------------------- property test

OPS = st.lists(st.one_of(
    st.tuples(st.just("append_main"), st.integers(1, 3)),
    st.tuples(st.just("overwrite_main"), st.integers(1, 3)),
    st.tuples(st.just("branch"), st.integers(0, 1)),
    st.tuples(st.just("append_branch"), st.integers(0, 1)),
    st.tuples(st.just("overwrite_branch"), st.integers(0, 1)),
    st.tuples(st.just("new_table_on_branch"), st.integers(0, 1)),
    st.tuples(st.just("merge"), st.integers(0, 1)),
    st.tuples(st.just("delete_branch"), st.integers(0, 1)),
    st.tuples(st.just("delete_branch"), st.integers(0, 1)),
    st.tuples(st.just("orphan"), st.just(0)),
    st.tuples(st.just("orphan"), st.just(0)),
), min_size=4, max_size=10)
AGES = [72, 48, 25, 23, 12, 1, 0]  # hours; the threshold is 24 (old first: the simplest examples age everything)


@hsettings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))  # ~0.4 s each: no Spark
@given(ops=OPS, rnd=st.randoms(use_true_random=False))
def test_property_sweep_never_deletes_a_reachable_file(ops, rnd):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # a retention window of 0 days: no past commit or deleted branch keeps anything (test_gc.py has the window)
        engine = project(root, "  orphan_file_max_age_hours: 24\n  snapshot_max_age_days: 0\n")
        key = "demo.bronze.items"
        create_table(engine, key).append(rows(1))
        counter = iter(range(10_000))
        # a live branch with its own commits on the table main also uses, then the random operations
        for op, arg in [("branch", 0), ("append_branch", 0), ("append_main", 1), *ops]:
            branch = f"b{arg}"
            exists = branch in {r.name for r in engine.state.catalog.list_refs()}
            if op == "append_main":
                engine.state.catalog.load_table(MAIN, key).append(rows(arg, next(counter) * 10))
            elif op == "overwrite_main":
                engine.state.catalog.load_table(MAIN, key).overwrite(rows(arg, next(counter) * 10))
            elif op == "branch" and not exists:
                engine.state.catalog.create_branch(branch)
            elif op == "append_branch" and exists:
                engine.state.catalog.load_table(branch, key).append(rows(1, next(counter) * 10))
            elif op == "overwrite_branch" and exists:
                engine.state.catalog.load_table(branch, key).overwrite(rows(2, next(counter) * 10))
            elif op == "new_table_on_branch" and exists:
                other = f"demo.silver.t{next(counter)}"
                create_table(engine, other, ref=branch).append(rows(2))
            elif op == "merge" and exists:
                try:
                    engine.state.catalog.merge(branch)
                except RatuiError as exc:
                    assert exc.code == "RAT-CAT-003"
            elif op == "delete_branch" and exists:
                engine.state.catalog.delete_branch(branch)
            elif op == "orphan":
                path = root / "demo/warehouse/bronze/items/data" / f"orphan-{next(counter)}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"o")
        # every file gets an age: reachable ones old too, so only reachability can save them
        all_files = sorted(files_under(root / "demo/warehouse"))
        file_age = {p: rnd.choice(AGES) for p in all_files}
        for p, hours in file_age.items():
            age(Path(p), hours)
        reachable = reachable_oracle(engine)
        counts = {r.name: {k: engine.state.catalog.load_table(r.name, k).scan().to_arrow().num_rows
                           for k in engine.state.catalog.table_pointers(r.name)}
                    for r in engine.state.catalog.list_refs()}

        report = engine.reaper().run(tasks=["orphan_files"])
        assert report.ok, report.errors
        for p in all_files:
            real = os.path.realpath(p)
            if real in reachable:
                assert os.path.exists(p), f"reachable file deleted: {p}"
            elif file_age[p] > 24:
                assert not os.path.exists(p), f"unreachable old file kept: {p}"
            else:
                assert os.path.exists(p), f"young file deleted: {p}"
        assert {r.name: {k: engine.state.catalog.load_table(r.name, k).scan().to_arrow().num_rows
                         for k in engine.state.catalog.table_pointers(r.name)}
                for r in engine.state.catalog.list_refs()} == counts
        engine.close()
