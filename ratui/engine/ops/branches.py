"""The branch workflow: dev branches, merges that carry the landing ledger, diffs, history, rollback.

    create(state, "dev", from_ref="main")        a dev branch: pointers copied, the ledger's loads too
    merge(state, "dev", into="main")             Nessie's rule; the merged pipelines' loaded files go with them
    diff(state, "dev", "main")                   per table: which side changed it, snapshots, rows, files, schema
    log(state, "main", table=None)               commits, newest first, with the tables each changed
    plan_rollback(state, "main", to, table)      what a rollback would change (nothing is changed)
    rollback(state, plan)                        one new commit restoring earlier pointers; history kept

Names: `run-*` branches belong to runs, `publish-*` to atomic publishes; a user's branch takes any other valid
name. A ref followed by `@HASH` ("main@3f2a9c1b") is a past state: readable (query, diff, log), never written.
Every commit says what made it in `Commit.meta` (catalog/base.py), which is how the log names the run, the
pipeline and the pipeline version behind each snapshot, and how a rollback finds a run's commit.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.run import record
from ratui.engine.state.catalog import append_merge, merge_rule
from ratui.engine.state import journal
from ratui.engine.state.catalog.base import Commit, MergeResult, split_spec
from ratui.engine.vocabulary import MAIN, PUBLISH_PREFIX, RUN_PREFIX  # noqa: F401 - branches.RUN_PREFIX is read too

if TYPE_CHECKING:
    from ratui.engine.state.project_state import ProjectState

RESERVED = (RUN_PREFIX, PUBLISH_PREFIX)


def is_user_branch(name: str) -> bool:
    return name != MAIN and not name.startswith(RESERVED)


def check_writable(state: ProjectState, ref: str) -> None:
    """A ref runs may merge into: main or a user's branch that exists (RAT-CAT-002 / -007 / -012 otherwise)."""
    name, at = split_spec(ref)
    if at is not None:
        raise RatuiError("RAT-CAT-007", f"{ref} is a past state of {name}: runs write to a branch's head",
                         hint=f"Run on {name} itself, or create a branch from it: "
                              f"`ratui branch create NEW --from {ref}`.")
    if name.startswith(RESERVED):
        raise RatuiError("RAT-CAT-012", f"'{name}' is a branch ratui keeps for a run or a publish")
    state.get_ref(name)


# ---------------------------------------------------------------------------------------------- refs

def create(state: ProjectState, name: str, *, from_ref: str = MAIN):
    """A dev branch from `from_ref` (a branch, or a past state "ref@HASH"): its tables and loaded files."""
    if name.startswith(RESERVED) or name == MAIN:
        raise RatuiError("RAT-CAT-012", f"'{name}' is reserved: run-* and publish-* branches are ratui's own")
    source, at = split_spec(from_ref)
    if at is None:
        return state.catalog.create_branch(name, from_ref=source,
                                           in_tx=lambda conn: state.ledger.fork(conn, source, name))
    # from a past state: branch from the ref, then restore that commit's pointers in the same history
    commit = state.catalog.commit(from_ref)
    ref = state.catalog.create_branch(name, from_ref=source, in_tx=lambda conn: state.ledger.fork(conn, source, name))
    now = state.catalog.table_pointers(name)
    keys = set(now) | set(commit.pointers)
    state.catalog.restore(name, {k: commit.pointers.get(k) for k in keys}, dict(now),
                          f"branch {name} set to {source}@{commit.hash[:12]}",
                          {"kind": "rollback", "to": commit.hash, "tables": sorted(
                              k for k in keys if now.get(k) != commit.pointers.get(k))},
                          in_tx=lambda conn, c: _unload(state, conn, name, sorted(keys), commit.created_at))
    return ref


def delete(state: ProjectState, name: str) -> None:
    """Delete a user's branch (pointers and its ledger view; no file). Refused while runs merge into it."""
    if name.startswith(RUN_PREFIX):
        raise RatuiError("RAT-CAT-012", f"'{name}' belongs to a run: the run deletes it, or the reaper does")
    _refuse_active(state, name, None, "delete")
    if not is_user_branch(name):  # a publish branch: ratui's own, deleted after its publish (not undone)
        state.catalog.delete_branch(name, in_tx=lambda conn: state.ledger.drop_ref(conn, name))
        return
    ref = state.catalog.get_ref(name)
    pointers = state.catalog.table_pointers(name)

    def drop(conn: Any) -> None:  # the journal keeps what `ratui undo` needs to bring the branch back
        loads = state.ledger.loads_of(conn, name)
        state.ledger.drop_ref(conn, name)
        journal.add(conn, "delete", name, f"delete branch {name} ({len(pointers)} table(s))", after=ref.head,
                    data={"pointers": pointers, "ledger": loads})

    state.catalog.delete_branch(name, in_tx=drop)


def _refuse_active(state: ProjectState, ref: str, tables: list[str] | None, what: str) -> None:
    active = state.history.active_on(ref, tables)
    if active:
        first = active[0]
        raise RatuiError("RAT-CAT-011", f"cannot {what} {ref}: run {first['id']} of {first['pipeline']} is still "
                         f"{first['status']} on it" + (f" (and {len(active) - 1} more)" if len(active) > 1 else ""))


# --------------------------------------------------------------------------------------------- merge

def runs_since_fork(state: ProjectState, ref: str) -> list[str]:
    """The runs merged into `ref` since it was created, oldest first (a merge of it carries them)."""
    runs: list[str] = []
    for commit in state.catalog.log(ref, limit=100_000, own=True):
        if commit.ref != ref or commit.meta.get("kind") == "branch":
            break
        runs.extend(commit.meta.get("runs") or ([commit.meta["run_id"]] if commit.meta.get("run_id") else []))
    return list(reversed(runs))


Verify = Callable[[str, list[str]], None]  # (temporary ref holding the combined state, tables merged by append)


def merge(state: ProjectState, ref: str, *, into: str = MAIN, dry_run: bool = False, message: str | None = None,
          kind: str = "merge", verify: Verify | None = None) -> MergeResult:
    """Merge a branch into `into` with Nessie's rule (a table both changed since the fork is a conflict: RAT-CAT-003,
    nothing changed). The landing files the merged pipelines loaded on the branch become loaded on `into` in the
    same transaction, so the next run on `into` does not load them again.

    A table both sides only appended to since the fork merges by append instead (catalog/append_merge.py) when a
    `verify` is given: the merge is built on a temporary branch from `into`'s head (the branch's other changes,
    then the branch's added files re-committed as one fast append per table), `verify(temp, tables)` runs the
    tables' quality tests there and raises to refuse, and the temporary branch then merges into `into` in one
    commit (guarded like any merge: `into` moving meanwhile is RAT-CAT-003). Nothing reaches `into` unless every
    table succeeded. A dry run says which tables would merge by append (`by_append`) and why the others conflict
    (`reasons`); it needs no `verify`."""
    check_writable(state, into)
    catalog = state.catalog
    if dry_run:
        result = catalog.merge(ref, into, dry_run=True)
        if not result.conflicts:
            return result
        verdicts = judge_conflicts(state, ref, into, result.conflicts)
        return replace(result, conflicts=[k for k, v in verdicts.items() if not v.by_append],
                       by_append=[k for k, v in verdicts.items() if v.by_append],
                       reasons={k: v.reason for k, v in verdicts.items() if not v.by_append})
    runs = runs_since_fork(state, ref)

    def hand_on(conn: Any, result: MergeResult) -> None:
        if result.commit is not None:
            state.ledger.hand_on(conn, ref, into, result.tables, result.commit.created_at)
            record.landings_in_tx(conn, runs, result.tables, into, result.commit.created_at)
            journal.add(conn, kind, into, result.commit.message, before=result.commit.parent,
                        after=result.commit.hash, data={"tables": sorted(result.tables), "from": ref})

    meta = {"kind": kind, "from": ref, "runs": runs}
    text = message or f"merge {ref} into {into}"
    try:
        return catalog.merge(ref, into, message=text, in_tx=hand_on, meta=meta)
    except RatuiError as exc:
        if exc.code != "RAT-CAT-003" or verify is None:
            raise
        conflicts = list(exc.details.get("tables") or [])
    verdicts = judge_conflicts(state, ref, into, conflicts)
    refused = {k: v.reason for k, v in verdicts.items() if not v.by_append}
    if refused or not verdicts:
        raise merge_rule.conflict(ref, into, sorted(refused) or conflicts, (
            f"cannot merge '{ref}' into '{into}': " + "; ".join(f"{k}: {why}" for k, why in sorted(refused.items()))
            if refused else None)) from None
    plans = [v.plan for v in verdicts.values() if v.plan is not None]
    temp = f"{PUBLISH_PREFIX}merge-{uuid.uuid4().hex[:12]}"
    catalog.create_branch(temp, from_ref=into)
    try:
        catalog.merge(ref, temp, message=f"merge {ref} (tables not merged by append)", skip=[p.table for p in plans],
                      meta={"kind": "merge", "from": ref})
        for plan in plans:
            append_merge.commit(catalog, temp, plan, source=ref, runs=runs)
        catalog.record_commit(temp, f"merge by append from {ref}: {', '.join(p.table for p in plans)}",
                              {"kind": "merge", "from": ref, "by_append": [p.table for p in plans]})
        verify(temp, [p.table for p in plans])
        try:
            result = catalog.merge(temp, into, message=f"{text} (by append: {', '.join(p.table for p in plans)})",
                                   in_tx=hand_on,
                                   meta={**meta, "by_append": [p.table for p in plans]})
        except RatuiError as exc:
            if exc.code != "RAT-CAT-003":
                raise
            moved = list(exc.details.get("tables") or [])
            raise merge_rule.conflict(ref, into, moved, f"cannot merge '{ref}' into '{into}': {into} changed "
                                      f"{', '.join(moved)} while the merge by append was checked; merge again"
                                      ) from None
    finally:
        try:
            catalog.delete_branch(temp)
        except RatuiError:
            pass  # gone already; else the reaper's orphan-branch task removes it
    return replace(result, ref=ref, by_append=[p.table for p in plans])


def judge_conflicts(state: ProjectState, ref: str, into: str, tables: list[str]) -> dict[str, append_merge.Verdict]:
    """Each conflicting table of a merge of `ref` into `into`: by append, or why not."""
    changes = {c.table: c for c in state.catalog.diff(ref, into)}
    out: dict[str, append_merge.Verdict] = {}
    for key in sorted(tables):
        change = changes.get(key)
        out[key] = (append_merge.judge(state.catalog, change, into) if change is not None
                    else append_merge.Verdict(key, None, f"{into} changed it since the branch was created"))
    return out


# ---------------------------------------------------------------------------------------------- diff

@dataclass(frozen=True)
class TableState:
    location: str | None
    snapshot_id: int | None = None
    rows: int | None = None
    files: int | None = None
    columns: tuple[tuple[int, str, str], ...] = ()  # (field id, name, type)


@dataclass(frozen=True)
class TableDiff:
    table: str
    change: str  # added | dropped | modified (from `left`'s side: added = only on left)
    changed_on: str  # which side changed it since the fork: "left", "right", "both" (a conflict) or "" (unrelated)
    left: TableState
    right: TableState
    schema_changes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for side in ("left", "right"):
            out[side]["columns"] = [list(c) for c in out[side]["columns"]]
        return out


def table_state(state: ProjectState, location: str | None) -> TableState:
    if location is None:
        return TableState(None)
    metadata = state.catalog.static_table(location).metadata
    snapshot = metadata.current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}

    def number(key: str) -> int | None:
        try:
            return int(summary[key])
        except (KeyError, ValueError):
            return None

    columns = tuple((f.field_id, f.name, str(f.field_type)) for f in metadata.schema().fields)
    return TableState(location, snapshot.snapshot_id if snapshot else None, number("total-records"),
                      number("total-data-files"), columns)


def schema_changes(before: TableState, after: TableState) -> list[str]:
    """Column changes from `before` to `after`, by field id (a rename keeps its id)."""
    old = {fid: (name, kind) for fid, name, kind in before.columns}
    new = {fid: (name, kind) for fid, name, kind in after.columns}
    out = [f"+ {new[f][0]} {new[f][1]}" for f in new if f not in old]
    out += [f"- {old[f][0]}" for f in old if f not in new]
    for fid in sorted(set(old) & set(new)):
        (a, ta), (b, tb) = old[fid], new[fid]
        if a != b:
            out.append(f"~ {a} renamed to {b}")
        if ta != tb:
            out.append(f"~ {b} {ta} -> {tb}")
    return out


def diff(state: ProjectState, left: str, right: str = MAIN) -> list[TableDiff]:
    """Every table whose pointer differs between `left` and `right` (refs or past states), with what each side
    holds; when `left` is a branch of `right`, which side changed it since the fork."""
    catalog = state.catalog
    a, b = catalog.table_pointers(left), catalog.table_pointers(right)
    sides: dict[str, str] = {}
    if split_spec(left)[1] is None and split_spec(right)[1] is None and left != right:
        ref = catalog.get_ref(left)
        if ref.fork_hash is not None:
            try:
                for table_change in catalog.diff(left, right):
                    sides[table_change.table] = "both" if table_change.conflict else "left"
            except RatuiError:
                pass
            base = _fork_pointers(state, left)
            for key in set(a) | set(b):
                if key not in sides and base is not None and b.get(key) != base.get(key):
                    sides[key] = "right"
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        mine, theirs = table_state(state, a.get(key)), table_state(state, b.get(key))
        change = "added" if key not in b else "dropped" if key not in a else "modified"
        out.append(TableDiff(key, change, sides.get(key, ""), mine, theirs, schema_changes(theirs, mine)))
    return out


def _fork_pointers(state: ProjectState, ref: str) -> dict[str, str] | None:
    for commit in state.catalog.log(ref, limit=100_000, own=True):
        if commit.ref == ref and commit.meta.get("kind") == "branch":
            return commit.pointers
        if commit.ref != ref:
            break
    return None


# ----------------------------------------------------------------------------------------------- log

@dataclass(frozen=True)
class LogEntry:
    hash: str
    ref: str
    created_at: str
    message: str
    kind: str
    run_id: str | None
    pipeline: str | None
    version: str | None
    runs: list[str]
    tables: list[dict[str, Any]]  # {table, change, snapshot_id, rows, location}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def log(state: ProjectState, ref: str = MAIN, *, table: str | None = None, limit: int = 50,
        details: bool = True) -> list[LogEntry]:
    """The ref's commits, newest first, each with the tables it changed (for `table`, only commits changing
    it). `details` reads each changed table's metadata for its snapshot id and row count."""
    commits = state.catalog.log(ref, limit=100_000 if table else limit + 1)
    out: list[LogEntry] = []
    for i, commit in enumerate(commits):
        if len(out) >= limit:
            break
        parent = commits[i + 1].pointers if i + 1 < len(commits) else ({} if commit.parent is None else None)
        if parent is None:
            parent = _parent_pointers(state, commit)
        changed = sorted(k for k in set(commit.pointers) | set(parent) if commit.pointers.get(k) != parent.get(k))
        if table is not None and table not in changed:
            continue
        tables = []
        for key in changed:
            location = commit.pointers.get(key)
            entry: dict[str, Any] = {"table": key, "change": "dropped" if location is None else
                                     "added" if key not in parent else "modified", "location": location,
                                     "snapshot_id": None, "rows": None}
            if details and location is not None:
                try:
                    ts = table_state(state, location)
                    entry.update(snapshot_id=ts.snapshot_id, rows=ts.rows)
                except Exception:  # a metadata file gone (expired past retention): the log still shows the commit
                    pass
            tables.append(entry)
        meta = commit.meta
        carried = state.history.versions(list(meta.get("runs") or [])) if meta.get("runs") else {}
        for entry in tables:  # which run (and pipeline version) a merged branch's table came from
            made = [(r, v) for r, v in carried.items() if v["pipeline"] == entry["table"]]
            if made:
                run_id, info = max(made)
                entry.update(run_id=run_id, version=info["version"])
            elif meta.get("pipeline") == entry["table"]:
                entry.update(run_id=meta.get("run_id"), version=meta.get("version"))
        out.append(LogEntry(commit.hash, commit.ref, commit.created_at, commit.message,
                            meta.get("kind") or _kind_of(commit), meta.get("run_id"), meta.get("pipeline"),
                            meta.get("version"), list(meta.get("runs") or []), tables))
    return out


def _kind_of(commit: Commit) -> str:
    """Commits made before commits carried `meta` (older ratui): their kind from the message."""
    message = commit.message
    if message.startswith("run "):
        return "run"
    if message.startswith("merge "):
        return "merge"
    if message.startswith("reaper"):
        return "reaper"
    if message.startswith("create branch"):
        return "branch"
    return "commit" if commit.parent else "init"


def _parent_pointers(state: ProjectState, commit: Commit) -> dict[str, str]:
    if commit.parent is None:
        return {}
    try:
        return state.catalog.commit(f"{commit.ref}@{commit.parent}").pointers
    except RatuiError:  # the parent lies on the ref the branch came from
        for ref in state.catalog.list_refs():
            try:
                return state.catalog.commit(f"{ref.name}@{commit.parent}").pointers
            except RatuiError:
                continue
    return {}


# ------------------------------------------------------------------------------------------ rollback

@dataclass(frozen=True)
class RollbackChange:
    table: str
    before: TableState  # what the ref has now
    after: TableState  # what the rollback restores (location None: the table leaves the ref)


@dataclass(frozen=True)
class RollbackPlan:
    ref: str
    table: str | None  # None: every table of the ref
    to: Commit
    expected: dict[str, str | None]
    changes: list[RollbackChange]
    reloadable: int  # landing files that become loadable again

    @property
    def pointers(self) -> dict[str, str | None]:
        return {c.table: c.after.location for c in self.changes}

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "table": self.table, "to": self.to.hash, "to_created_at": self.to.created_at,
                "to_message": self.to.message, "reloadable_files": self.reloadable,
                "changes": [{"table": c.table, "before": asdict(c.before), "after": asdict(c.after)}
                            for c in self.changes]}


def find_target(state: ProjectState, ref: str, to: str, table: str | None = None) -> Commit:
    """The commit `to` names on `ref`: a run id (the commit that merged it, or carried it in a merge), or a
    commit hash (prefix). RAT-CAT-010 if neither."""
    to = to.strip()
    history = state.catalog.log(ref, limit=100_000)
    by_run = [c for c in history if c.ref == ref and c.meta.get("kind") != "rollback" and (
        c.meta.get("run_id", "").startswith(to) or any(r.startswith(to) for r in c.meta.get("runs") or []))]
    if table is not None:
        by_run = [c for c in by_run if table in c.pointers]
    runs = {c.meta.get("run_id") for c in by_run if c.meta.get("run_id")} | {
        r for c in by_run for r in c.meta.get("runs") or [] if r.startswith(to)}
    by_hash = [c for c in history if c.hash.startswith(to.lower())] if len(to) >= 6 else []
    if len(runs) > 1 or (by_run and by_hash and by_run[0].hash != by_hash[0].hash):
        raise RatuiError("RAT-CAT-010", f"'{to}' names more than one run or commit on {ref}: give more of it")
    if by_run:
        return by_run[0]  # newest first: the commit that put the run's result on the ref
    if len(by_hash) == 1:
        return by_hash[0]
    raise RatuiError("RAT-CAT-010", f"no run or commit '{to}' in the history of {ref}",
                     hint=f"`ratui log --ref {ref}` lists its commits and the runs that made them.")


def plan_rollback(state: ProjectState, ref: str, to: str, table: str | None = None) -> RollbackPlan:
    """What `rollback` would do: nothing is changed. RAT-CAT-011 while a run that could change the tables merges
    into the ref; RAT-CAT-005 for a table the ref never had at or after that commit."""
    check_writable(state, ref)
    target = find_target(state, ref, to, table)
    now = state.catalog.table_pointers(ref)
    if table is not None:
        if table not in now and table not in target.pointers:
            raise RatuiError("RAT-CAT-005", f"table '{table}' is neither on {ref} nor in commit {target.hash[:12]}")
        keys = [table]
    else:
        keys = sorted(set(now) | set(target.pointers))
    _refuse_active(state, ref, keys if table is not None else None, "roll back")
    changes = [RollbackChange(k, table_state(state, now.get(k)), table_state(state, target.pointers.get(k)))
               for k in keys if now.get(k) != target.pointers.get(k)]
    reloadable = state.ledger.loaded_since(ref, [c.table for c in changes], target.created_at)
    return RollbackPlan(ref, table, target, {k: now.get(k) for k in keys}, changes, reloadable)


def rollback(state: ProjectState, plan: RollbackPlan) -> Commit | None:
    """Apply a plan: one new commit on the ref (None when the ref already is in that state). If a table moved
    since the plan was made, RAT-CAT-003 and nothing changes. The landing files the rolled-back pipelines loaded
    after the target commit become loadable again in the same transaction."""
    if not plan.changes:
        return None
    _refuse_active(state, plan.ref, [c.table for c in plan.changes] if plan.table else None, "roll back")
    tables = [c.table for c in plan.changes]
    what = plan.table or "all tables"

    def unload(conn: Any, commit: Commit) -> None:  # the journal keeps the loads it undoes, for `ratui undo`
        saved = state.ledger.loads_after(conn, plan.ref, tables, plan.to.created_at)
        _unload(state, conn, plan.ref, tables, plan.to.created_at)
        journal.add(conn, "rollback", plan.ref, commit.message, before=commit.parent, after=commit.hash,
                    data={"tables": tables, "ledger": saved})

    return state.catalog.restore(
        plan.ref, plan.pointers, {k: plan.expected.get(k) for k in tables},
        f"rollback {what} to {plan.to.hash[:12]} ({plan.to.message})",
        {"kind": "rollback", "to": plan.to.hash, "tables": tables}, in_tx=unload)


def _unload(state: ProjectState, conn: Any, ref: str, pipelines: list[str], after: str) -> None:
    state.ledger.unload_after(conn, ref, pipelines, after)


def parse_when(text: str) -> str:
    """A user's timestamp ("2026-11-24 10:15", "2026-11-24T10:15:00Z", a date) as the catalog stores times
    (ISO, UTC, microseconds). Times without a zone are UTC. RAT-CLI-001 if it is not a time."""
    raw = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise RatuiError("RAT-CLI-001", f"'{text[:60]}' is not a time", hint="Give an ISO time such as "
                         "2026-11-24T10:15:00 (UTC unless it names a zone), or a date.") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")
