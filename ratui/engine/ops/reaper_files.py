"""The reaper's tasks over files (ops/reaper.py lists every task):

    processed_files   archived landing files older than the age, but the newest of each zone
    orphan_files      the mark-and-sweep of ops/orphans.py over every store the project's files are in
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from ratui.engine.errors import RatuiError
from ratui.engine.landing.names import archived_run, is_readable_archive
from ratui.engine.landing.zone import Zone, every_zone
from ratui.engine.ops import orphans
from ratui.engine.ops.orphan_mark import Marker, MarkResult, commit_pointers, deleted_heads, live_pointers
from ratui.engine.ops.orphan_stores import LOCAL, ObjectStore
from ratui.engine.ops.reaper_pass import ReaperPass
from ratui.engine.ops.reaper_report import TaskReport
from ratui.engine.storage.warehouse import STAGING
from ratui.engine.vocabulary import MAIN

# the orphan sweep's counts in its task's stats -> SweepPlan's fields
SWEEP_STATS = {"scanned": "scanned", "reachable_scanned": "reachable", "young_unreachable": "young",
               "protected_live_run": "protected", "other_projects_staging": "foreign"}


def processed_files(p: ReaperPass, task: TaskReport) -> None:
    max_age = timedelta(days=p.settings.reaper_processed_max_age_days).total_seconds()
    now = p.now.timestamp()
    for zone in every_zone(p.settings):
        try:
            _processed_of(p, task, zone, now, max_age)
        except RatuiError as exc:  # an unreachable store: the other zones are done, this one is reported
            task.fail(exc)


def _processed_of(p: ReaperPass, task: TaskReport, zone: Zone, now: float, max_age: float) -> None:
    """One zone's archive (`_processed/{run_id}/`): what is older than the retention goes, but the newest file a
    run could read (its columns are read when nothing new arrives)."""
    runs = {e: run for e in zone.processed() if (run := archived_run(e.name))}
    if not runs:
        return
    ended = p.history.end_times(set(runs.values()))
    # an object store keeps times in whole seconds: among equals, the run that ended last (run ids sort by the
    # second they were made in, then at random)
    newest = max((e for e in runs if is_readable_archive(e.name)), default=None,
                 key=lambda e: (e.mtime_ns, ended.get(runs[e], 0.0), runs[e]))
    doomed = []
    for entry, run_id in runs.items():
        age = now - max(entry.mtime_ns / 1e9, ended.get(run_id, 0.0))
        if age <= max_age:
            continue
        shown = p.rel(zone.where(entry.name))
        item = {"name": shown, "path": shown, "bytes": entry.size, "run_id": run_id,
                "age_days": round(age / 86400, 2)}
        if entry == newest:
            task.kept.append({**item, "reason": "newest archived file of the zone (its columns are read "
                                                "when nothing new arrives)"})
            continue
        task.found.append(item)
        task.bytes_found += entry.size
        doomed.append((entry, item))
    if p.dry_run or not doomed:
        return
    deleted = zone.purge([e for e, _ in doomed])
    for entry, item in doomed:
        if entry.name in deleted:
            task.removed.append(item)
            task.bytes_freed += entry.size
            p.state.ledger.mark_purged(zone.namespace, zone.name, entry.name)

# ------------------------------------------------------------------------------------- snapshots


def orphan_files(p: ReaperPass, task: TaskReport) -> None:
    hours = p.settings.reaper_orphan_file_max_age_hours
    older_than = p.now.timestamp() - hours * 3600
    # every live ref, every kept commit inside the snapshot retention window (and the one in force when it
    # opens), and every branch deleted inside it: a rollback, a time-travel read or undoing the deletion may
    # still need what they point at. A branch this pass deletes (dry or real) is deleted inside the window, so
    # a dry run marks exactly what the real run does.
    pointers = live_pointers(p.catalog)
    retention = p.now - timedelta(days=p.settings.reaper_snapshot_max_age_days)
    history = commit_pointers(p.catalog, retention.isoformat(timespec="microseconds"))
    pointers = pointers + history
    expire = {(MAIN, key): ids for key, ids in p.expiry.items()}
    marker = Marker(p.catalog.locations, p.catalog.file_io_properties())
    mark = marker.mark(pointers, expire=expire)
    live = p.live_runs()
    plans = [(area, area.plan(mark.files, older_than=older_than, live_runs=live)) for area in sweep_areas(p)]
    kinds = _classify(p, marker, mark, [o for _a, plan in plans for o in plan.orphans])
    task.stats = {"refs": len({p.ref for p in pointers}), "tables": len(pointers),
                  "metadata_files_read": mark.metadata_files, "snapshots": mark.snapshots,
                  "manifests": mark.manifests, "reachable_files": len(mark.files),
                  **{stat: sum(getattr(plan, field) for _a, plan in plans) for stat, field in SWEEP_STATS.items()},
                  "by_kind": {kind: {"files": 0, "bytes": 0} for kind in orphans.KINDS}}
    ordered = sorted(((area, orphan) for area, plan in plans for orphan in plan.orphans),
                     key=lambda pair: (orphans.KINDS.index(kinds[pair[1].path][0]), kinds[pair[1].path][1] or "",
                                       pair[1].path))
    for area, orphan in ordered:
        kind, what = kinds[orphan.path]
        item = {"name": p.rel(orphan.path), "path": p.rel(orphan.path), "bytes": orphan.size,
                "age_hours": round((p.now.timestamp() - orphan.mtime) / 3600, 2), "kind": kind}
        if kind == orphans.DROPPED_TABLE:
            item["table"] = what
        elif kind == orphans.DELETED_BRANCH:
            item["ref"] = what
        task.found.append(item)
        task.bytes_found += orphan.size
        task.stats["by_kind"][kind]["files"] += 1
        task.stats["by_kind"][kind]["bytes"] += orphan.size
        if p.dry_run:
            continue
        freed = area.remove(orphan, older_than=older_than, whole_folder=kind == orphans.DROPPED_TABLE)
        if freed is not None:
            task.removed.append(item)
            task.bytes_freed += freed


def _classify(p: ReaperPass, marker: Marker, mark: MarkResult,
              found: list[orphans.OrphanFile]) -> dict[str, tuple[str, str | None]]:
    """What left each unreachable file (orphans.classify): only the heads of deleted branches whose metadata
    file is itself unreachable are read (the others left nothing of their own here). Telling is best effort:
    a head that cannot be read just tells nothing."""
    if not found:
        return {}
    paths = {o.path for o in found}
    deleted: list[tuple[str, set[str]]] = []
    for name, heads in deleted_heads(p.catalog):
        own = [p for p in heads if marker.name_of(p.location) in paths]
        if not own:
            continue
        try:
            deleted.append((name, marker.mark(own).files))
        except RatuiError:
            continue
    return orphans.classify(found, mark.tables, deleted)


def sweep_areas(p: ReaperPass) -> list[orphans.SweepArea]:
    """Where the sweep looks. On this disk: every `{ns}/warehouse/` of the tables' folder (only this project's
    namespaces when catalog.warehouse is a folder other projects share) and the staging folders of runs
    (`.ratui/staging/{run_id}/`). With an s3:// warehouse also, in its bucket, this project's namespaces
    (`{warehouse}/{ns}/warehouse/`: never another project's in a shared bucket) and the staging prefixes of this
    project's runs (`{warehouse}/_ratui/staging/{run_id}/`). Tables made before the warehouse moved to S3 keep
    their folders here, so the local area stays."""
    tables_root = Path(p.catalog.warehouse)  # the project folder, or a Nessie catalog's catalog.warehouse
    project_root = Path(os.path.realpath(p.settings.root))
    shared = Path(os.path.realpath(tables_root)) != project_root
    namespaces = sorted(p.name for p in p.settings.root.iterdir() if (p / "pipelines").is_dir())
    roots = [str(r) for r in orphans.warehouse_roots(tables_root, namespaces if shared else None)]
    staging = p.settings.state_dir / "staging"
    run_roots = [os.path.realpath(staging)] if staging.is_dir() and not staging.is_symlink() else []
    areas = [orphans.SweepArea(LOCAL, tables_root, roots),
             orphans.SweepArea(LOCAL, project_root, run_roots=run_roots)]
    storage = p.catalog.storage
    if storage.remote:
        areas.append(orphans.SweepArea(
            ObjectStore(storage), storage.url, [storage.namespace_root(ns) for ns in namespaces],
            [storage.uri(STAGING)], own_run=lambda run_id: p.history.get_run(run_id) is not None))
    return areas
