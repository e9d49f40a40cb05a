"""Merging by append: a table both sides only appended to since the fork merges as one more append on the target.

Nessie's rule makes a table that the branch and the target both changed since the fork a conflict, even when both
only added rows (projectnessie/nessie#10216). For such a table ratui looks into the Iceberg metadata of the three
states (fork, branch, target): when

- the schema and the partitioning are the fork's on both sides,
- every snapshot either side made since the fork is an `append` that added no delete file (the walk stops at
  the fork's snapshot; snapshots the target expired since are vouched for by the file check below),
- every data file of the fork is still live on both sides and neither side has a delete file the fork did not,
- and no landing file was loaded on both sides (the same rows would land twice),

`judge` says "by append" and lists the data files the branch added that the target does not have yet (by path: a
branch merged before, on Nessie's incremental merges, adds nothing twice). `commit` puts them on the target's head
as one fast append: the same files (no copy), new manifest entries whose sequence numbers are the new snapshot's,
and a snapshot summary naming the merge (`ratui.merge = append`, the branch, its snapshots and runs) and carrying
the landing facts of the branch's snapshots (state/landing_facts.py), so other installations learn the loads.

Anything else (an overwrite, a delete, merge-on-read deletes, a schema or partitioning change, a table added or
dropped on one side) stays a conflict: `Verdict.reason` says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ratui.engine.state import landing_facts
from ratui.engine.state.catalog.base import TableChange

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata

    from ratui.engine.state.catalog.base import BranchCatalog

MERGE_PROPERTY = "ratui.merge"  # "append" on a snapshot a merge by append made
FROM_PROPERTY = "ratui.merged-from"  # the branch merged
SNAPSHOTS_PROPERTY = "ratui.merged-snapshots"  # the branch's snapshot ids (comma separated) whose files it carries
RUNS_PROPERTY = "ratui.merged-runs"  # the runs the branch carried (comma separated)
_DELETE_COUNTS = ("added-delete-files", "added-position-delete-files", "added-equality-delete-files",
                  "added-position-deletes", "added-equality-deletes", "deleted-data-files", "deleted-records",
                  "removed-delete-files")


@dataclass(frozen=True)
class AppendPlan:
    """What a merge by append puts on the target: `files` on top of `target_location` (the target's pointer)."""

    table: str
    target_location: str
    files: list[Any]  # pyiceberg DataFile: the branch's added data files the target lacks
    snapshots: list[int]  # the branch's snapshots since the fork, oldest first
    facts: list[dict] = field(default_factory=list)  # landing facts of those snapshots (raw summary items)

    @property
    def rows(self) -> int:
        return sum(int(f.record_count) for f in self.files)


@dataclass(frozen=True)
class Verdict:
    """One conflicting table: `plan` when it merges by append, else `reason` (why it stays a conflict)."""

    table: str
    plan: AppendPlan | None
    reason: str = ""

    @property
    def by_append(self) -> bool:
        return self.plan is not None


@dataclass
class _Side:
    ok: bool = True
    reason: str = ""
    snapshots: list[Any] = field(default_factory=list)  # walked, newest first


def _walk(metadata: TableMetadata, stop: int | None, side: str) -> _Side:
    """The snapshots `metadata` made since snapshot `stop` (the fork's), each checked to be a plain append. A walk
    that cannot reach `stop` (expired snapshots, a rolled-back table) is fine here: the file check decides."""
    out = _Side()
    snapshot = metadata.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != stop:
        summary = snapshot.summary
        operation = str(getattr(summary.operation, "value", summary.operation)) if summary else "unknown"
        props = summary.additional_properties if summary else {}
        if operation != "append":
            return _Side(False, f"{side} made an {operation} (snapshot {snapshot.snapshot_id})")
        if any(int(props.get(k) or 0) for k in _DELETE_COUNTS):
            return _Side(False, f"{side} wrote deletes (snapshot {snapshot.snapshot_id})")
        out.snapshots.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
    return out


def _live(metadata: TableMetadata, snapshot_id: int | None, io: Any) -> tuple[dict[str, Any], set[str]]:
    """The live data files (path -> DataFile) and delete files (paths) of one snapshot."""
    from pyiceberg.manifest import DataFileContent

    data: dict[str, Any] = {}
    deletes: set[str] = set()
    snapshot = metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    if snapshot is None:
        return data, deletes
    for manifest in snapshot.manifests(io):
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            f = entry.data_file
            if f.content == DataFileContent.DATA:
                data[f.file_path] = f
            else:
                deletes.add(f.file_path)
    return data, deletes


def _facts(snapshots: list[Any]) -> list[dict]:
    out: list[dict] = []
    for snapshot in snapshots:
        text = (snapshot.summary.additional_properties if snapshot.summary else {}).get(landing_facts.PROPERTY)
        try:
            items = json.loads(text) if text else []
        except ValueError:
            items = []
        out.extend(i for i in items if isinstance(i, dict))
    return out


def _same_load(a: dict, b: dict) -> bool:
    if (a.get("zone"), a.get("name"), a.get("size")) != (b.get("zone"), b.get("name"), b.get("size")):
        return False
    fact = landing_facts.LandingFact(str(a.get("zone")), str(a.get("name")), int(a.get("size") or 0),
                                     int(a.get("mtime_ns") or 0), a.get("digest"), a.get("etag"), a.get("version"))
    return fact.same_file(int(b.get("size") or 0), int(b.get("mtime_ns") or 0), b.get("digest"), b.get("etag"),
                          b.get("version"))


def judge(catalog: BranchCatalog, change: TableChange, into: str = "main") -> Verdict:
    """Whether a conflicting table change merges by append (see the module docstring). Reads metadata and
    manifests only; changes nothing."""
    key = change.table
    if change.change != "modified" or None in (change.fork_location, change.branch_location, change.main_location):
        what = {"added": "added on both sides", "dropped": "dropped on the branch"}.get(change.change,
                                                                                       f"dropped on {into}")
        return Verdict(key, None, what)
    try:
        fork = catalog.static_table(str(change.fork_location))
        branch = catalog.static_table(str(change.branch_location))
        target = catalog.static_table(str(change.main_location))
    except Exception as exc:  # noqa: BLE001 - a metadata file gone: nothing to prove appends with
        return Verdict(key, None, f"its metadata cannot be read ({type(exc).__name__})")
    fm, bm, tm = fork.metadata, branch.metadata, target.metadata
    for side, md in (("the branch", bm), (into, tm)):
        if md.table_uuid != fm.table_uuid:
            return Verdict(key, None, f"{side} replaced the table with a new one")
        if md.schema().as_struct() != fm.schema().as_struct():
            return Verdict(key, None, f"{side} changed its schema")
        if md.spec() != fm.spec():
            return Verdict(key, None, f"{side} changed its partitioning")
    stop = fm.current_snapshot_id
    walked: dict[str, _Side] = {}
    for side, md in (("the branch", bm), (into, tm)):
        walked[side] = _walk(md, stop, side)
        if not walked[side].ok:
            return Verdict(key, None, walked[side].reason)
    io = branch.io
    # the fork's snapshot read through the branch's metadata: the branch keeps it (the target may have expired it)
    fork_data, fork_deletes = _live(bm if bm.snapshot_by_id(stop or -1) else fm, stop, io)
    branch_data, branch_deletes = _live(bm, bm.current_snapshot_id, io)
    target_data, target_deletes = _live(tm, tm.current_snapshot_id, target.io)
    for side, data, deletes in (("the branch", branch_data, branch_deletes), (into, target_data, target_deletes)):
        gone = [p for p in fork_data if p not in data]
        if gone:
            return Verdict(key, None, f"{side} removed or rewrote {len(gone)} data file(s)")
        if deletes - fork_deletes:
            return Verdict(key, None, f"{side} added delete files")
    ours, theirs = _facts(walked["the branch"].snapshots), _facts(walked[into].snapshots)
    both = sorted({str(a.get("name")) for a in ours for b in theirs if _same_load(a, b)})
    if both:
        return Verdict(key, None, f"both sides loaded landing file {both[0]}"
                       + (f" and {len(both) - 1} more" if len(both) > 1 else ""))
    added = [f for path, f in branch_data.items() if path not in fork_data and path not in target_data]
    snapshots = [s.snapshot_id for s in reversed(walked["the branch"].snapshots)]
    return Verdict(key, AppendPlan(key, str(change.main_location), added, snapshots, ours))


def commit(catalog: BranchCatalog, ref: str, plan: AppendPlan, *, source: str, runs: list[str]) -> str:
    """The plan's files as one fast append on table `plan.table` of `ref` (whose pointer must still be
    `plan.target_location`, else RAT-CAT-003); returns the new metadata location. Nothing to add: no commit."""
    from ratui.engine.state.catalog import merge_rule

    table = catalog.load_table(ref, plan.table)
    if table.metadata_location != plan.target_location:
        raise merge_rule.conflict(source, ref, [plan.table], f"{ref} changed {plan.table} meanwhile")
    if not plan.files:
        return table.metadata_location
    summary = {"ratui.message": f"merge by append from {source}", MERGE_PROPERTY: "append", FROM_PROPERTY: source,
               SNAPSHOTS_PROPERTY: ",".join(str(s) for s in plan.snapshots)}
    if runs:
        summary[RUNS_PROPERTY] = ",".join(runs)
    if plan.facts:
        summary[landing_facts.PROPERTY] = json.dumps(plan.facts, separators=(",", ":"), sort_keys=True)
    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties=summary).fast_append() as snap:
            for f in plan.files:
                snap.append_data_file(f)
    return table.metadata_location


def describe(files: list[DataFile]) -> str:
    return f"{len(files)} file(s), {sum(int(f.record_count) for f in files)} row(s)"
