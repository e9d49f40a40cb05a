"""The reaper's tasks over the tables on main (ops/reaper.py lists every task):

    compaction        data files whose position deletes take out enough of their rows: rewritten without them
    snapshots         snapshots older than the age, never a table's current one: expired, guarded on main's head

A table a run is writing right now waits for the next pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ratui.engine.errors import RatuiError
from ratui.engine.ops.reaper_pass import ReaperPass
from ratui.engine.ops.reaper_report import TaskReport
from ratui.engine.vocabulary import MAIN, iso as _iso


def compaction(p: ReaperPass, task: TaskReport) -> None:
    from pyiceberg.exceptions import CommitFailedException

    from ratui.engine.spark import session as spark_mod
    from ratui.engine.write.compaction import compact, plan_compaction

    share = p.settings.reaper_compact_deleted_percent / 100
    busy = {r["pipeline"] for r in p.live_runs().values()}
    for key in sorted(p.catalog.table_pointers(MAIN)):
        table = p.catalog.load_table(MAIN, key)
        targets = plan_compaction(table, share)
        if not targets:
            continue
        items = [{"name": f"{key}:{p.rel(t.file.file_path)}", "table": key,
                  "path": p.rel(t.file.file_path), "rows": t.file.record_count, "deleted_rows": t.deleted,
                  "deleted_percent": round(100 * t.share, 1), "delete_files": t.delete_files,
                  "bytes": t.file.file_size_in_bytes} for t in targets]
        if key in busy:
            task.kept.extend({**i, "reason": "a run of this table is in progress: the next pass compacts it"}
                             for i in items)
            continue
        task.found.extend(items)
        if p.dry_run:
            continue
        session = spark_mod.new_session(p.settings)
        message = f"reaper: compacted {len(targets)} file(s) of {key}"
        try:
            done = compact(session, table, targets, f"reaper{int(p.now.timestamp())}", message=message)
        except CommitFailedException:
            task.kept.extend({**i, "reason": "main moved while compacting: the next pass compacts it"}
                             for i in items)
            continue
        finally:
            spark_mod.release(session)
        p.catalog.record_commit(MAIN, message)
        task.removed.extend(items)
        task.stats[key] = {"files_rewritten": done.files_rewritten, "files_added": done.files_added,
                           "delete_files_removed": done.delete_files_removed, "rows": done.rows}


def snapshots(p: ReaperPass, task: TaskReport) -> None:
    cutoff_ms = int((p.now - timedelta(days=p.settings.reaper_snapshot_max_age_days)).timestamp() * 1000)
    busy = {r["pipeline"] for r in p.live_runs().values()}
    failures = []
    for key in sorted(p.catalog.table_pointers(MAIN)):
        try:
            _expire_table(p, task, key, cutoff_ms, busy)
        except Exception as exc:
            failures.append(f"{key}: {type(exc).__name__}: {exc}")
    if failures:
        raise RatuiError("RAT-RPR-001", "snapshot expiry failed for " + "; ".join(failures))


def _expire_table(p: ReaperPass, task: TaskReport, key: str, cutoff_ms: int, busy: set[str]) -> None:
    table = p.catalog.load_table(MAIN, key)
    metadata = table.metadata
    current = metadata.current_snapshot_id
    protected = {ref.snapshot_id for ref in metadata.refs.values()} | ({current} if current is not None else set())
    old = [s for s in metadata.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in protected]
    if not old:
        return
    items = [{"name": f"{key}@{s.snapshot_id}", "table": key, "snapshot_id": s.snapshot_id,
              "timestamp": _iso(datetime.fromtimestamp(s.timestamp_ms / 1000, timezone.utc))} for s in old]
    if key in busy:
        task.kept.extend({**i, "reason": "a run of this table is in progress: the next pass expires it"}
                         for i in items)
        return
    task.found.extend(items)
    ids = [s.snapshot_id for s in old]
    if p.dry_run:
        p.expiry[key] = set(ids)
        return
    from pyiceberg.table import Transaction
    from pyiceberg.table.update import AssertRefSnapshotId
    from pyiceberg.table.update.snapshot import ExpireSnapshots

    # table.maintenance.expire_snapshots(), with one more requirement: main's current snapshot is still the
    # one we looked at. The catalog then swaps main's metadata pointer only if nobody moved it meanwhile.
    expire = ExpireSnapshots(Transaction(table, autocommit=True))
    expire._requirements = (AssertRefSnapshotId(ref="main", snapshot_id=current),)  # type: ignore[call-arg]
    expire.by_ids(ids).commit()
    p.catalog.record_commit(MAIN, f"reaper: expired {len(ids)} snapshot(s) of {key}")
    task.removed.extend(items)

# ---------------------------------------------------------------------------------- orphan files
