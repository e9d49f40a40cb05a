"""Undo: the last run's merge, merge, atomic publish, rollback, branch delete or landing reset, from the journal ratui
keeps.

    plan(state)          the newest action not undone yet, and what undoing it changes (nothing is changed)
    apply(state, plan)   do it: one new commit (or the branch back, or the ledger rows back) and a journal entry

The journal (state/journal.py) records each of those actions in the action's own transaction (on a Nessie server,
right after Nessie accepted it): for a change to a ref, its head before and after (the catalog's commits hold both
states' table pointers); for a branch delete, the branch's last head and tables; for a landing reset, the ledger
rows as they were; and the ledger rows a merge or rollback handed on or took away.

How each is undone, never rewriting history or a data file:
- run (its own merge into its target), merge, publish, rollback: one new commit on the ref ("undo ...", meta kind
  "undo") setting every table the action changed back to the pointer the ref had before it (the same metadata file:
  the same snapshot, the same rows), guarded like a rollback (a table that moved meanwhile: RAT-CAT-003, nothing
  changed). A run's, merge's or publish's landing files become loadable again; a rollback's loads come back. The run
  stays in the history as it ran; change detection still counts it as the pipeline's last run (as after a rollback):
  edit the pipeline, or `ratui run --force`, to run it again.
- branch delete: the branch comes back at its last head with its tables and its landing loads.
- landing reset: the rows it reset get their state, run and attempts back.

Refused with RAT-UNDO-002, naming them, when later changes built on the action: the ref has commits after the
action's own (other than undos and the commits of actions undone already), or a run loaded a reset file since.
Successive undos walk back through the journal, newest first (lazygit's reflog undo); an undo is recorded but is
not itself undone (there is no redo): do the action again, or roll back to its commit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ratui.engine.errors import RatuiError
from ratui.engine.ops import branches
from ratui.engine.run import record
from ratui.engine.state import journal
from ratui.engine.state.catalog.base import Commit
from ratui.engine.state.journal import Entry

if TYPE_CHECKING:
    from ratui.engine.state.project_state import ProjectState

REF_KINDS = ("run", "merge", "publish", "rollback")  # a run: its own merge into its target
LOG_DEPTH = 500  # how far back the later-commit check looks for the action's commit


@dataclass(frozen=True)
class TableUndo:
    table: str
    now: branches.TableState
    restored: branches.TableState  # location None: the table leaves the ref


@dataclass(frozen=True)
class UndoPlan:
    entry: Entry
    what: str  # one line: what the undo does
    tables: list[TableUndo] = field(default_factory=list)
    ledger: int = 0  # landing-file rows whose state changes back
    ledger_what: str = ""
    expected: dict[str, str | None] = field(default_factory=dict)
    restore: dict[str, str | None] = field(default_factory=dict)
    scope: str | None = None  # the ref the undo was asked for (History of a ref), None: the newest action anywhere

    @property
    def lines(self) -> list[str]:
        """What changes, a line each, for the confirmation dialog and the command line."""
        out = [self.what]
        for t in self.tables:
            out.append(f"  {t.table}: {describe(t.now)} -> {describe(t.restored)}")
        if self.ledger:
            out.append(f"  {self.ledger} landing file row(s) {self.ledger_what}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"entry": self.entry.to_dict(), "what": self.what, "ledger_rows": self.ledger,
                "ledger": self.ledger_what, "lines": self.lines,
                "tables": [{"table": t.table, "now": asdict(t.now), "restored": asdict(t.restored)}
                           for t in self.tables]}


def describe(ts: branches.TableState) -> str:
    if ts.location is None:
        return "absent"
    rows = f", {ts.rows} rows" if ts.rows is not None else ""
    return f"snapshot {ts.snapshot_id}{rows}"


def plan(state: ProjectState, ref: str | None = None) -> UndoPlan:
    """The newest action not undone yet (with `ref`: on that ref) and what undoing it changes. RAT-UNDO-001 when
    there is none; RAT-UNDO-002 when later changes built on it; RAT-UNDO-003 when what it needs is gone."""
    entry = state.journal.last_undoable(ref)
    if entry is None:
        where = f" on {ref}" if ref is not None else ""
        raise RatuiError("RAT-UNDO-001", f"nothing to undo{where}: the journal holds no action{where} that is not "
                         "undone")
    return replace(_plan(state, entry), scope=ref)


def _plan(state: ProjectState, entry: Entry) -> UndoPlan:
    if entry.kind in REF_KINDS:
        return _plan_ref(state, entry)
    if entry.kind == "delete":
        return _plan_delete(state, entry)
    if entry.kind == "landing_reset":
        return _plan_reset(state, entry)
    raise RatuiError("RAT-UNDO-003", f"journal entry {entry.id} is of a kind this ratui cannot undo: {entry.kind}")


def _plan_ref(state: ProjectState, entry: Entry) -> UndoPlan:
    ref, catalog = entry.ref, state.catalog
    try:
        catalog.get_ref(ref)
    except RatuiError:
        raise RatuiError("RAT-UNDO-003", f"cannot undo '{entry.summary}': branch {ref} is gone") from None
    if entry.after is None or entry.before is None:
        raise RatuiError("RAT-UNDO-003", f"cannot undo '{entry.summary}': the journal lacks its commits")
    later = later_commits(state, ref, entry.after)
    if later:
        names = ", ".join(f"{c.hash[:12]} ({c.message})" for c in later[:5])
        raise RatuiError("RAT-UNDO-002", f"cannot undo '{entry.summary}': {len(later)} later commit(s) on {ref} "
                         f"built on it: {names}" + (" ..." if len(later) > 5 else ""),
                         details={"ref": ref, "commits": [c.hash for c in later], "entry": entry.id})
    before = catalog.commit(f"{ref}@{entry.before}").pointers
    after = catalog.commit(f"{ref}@{entry.after}").pointers
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    branches._refuse_active(state, ref, keys, "undo on")
    now = catalog.table_pointers(ref)
    tables = [TableUndo(k, branches.table_state(state, now.get(k)), branches.table_state(state, before.get(k)))
              for k in keys]
    if entry.kind == "rollback":
        saved = entry.data.get("ledger") or {}
        count = len(saved.get("files") or []) + len(saved.get("loads") or [])
        ledger_what = "loaded again, as before the rollback"
    else:
        count = _loaded_since(state, ref, keys, before_time(state, ref, entry.before))
        ledger_what = f"loadable again (the {entry.kind} had loaded them)"
    return UndoPlan(entry, f"undo {entry.kind} on {ref}: {entry.summary}", tables, count, ledger_what,
                    expected={k: after.get(k) for k in keys}, restore={k: before.get(k) for k in keys})


def _loaded_since(state: ProjectState, ref: str, pipelines: list[str], after: str) -> int:
    return state.ledger.loaded_since(ref, pipelines, after)


def before_time(state: ProjectState, ref: str, before: str) -> str:
    return state.catalog.commit(f"{ref}@{before}").created_at


def later_commits(state: ProjectState, ref: str, after: str) -> list[Commit]:
    """The ref's commits made after commit `after`, newest first, leaving out undos and the commits of actions
    undone already. RAT-UNDO-003 if `after` is not in the ref's recent history."""
    undone = {e.after for e in state.journal.newest(LOG_DEPTH) if e.undone_by is not None and e.after}
    out: list[Commit] = []
    for commit in state.catalog.log(ref, limit=LOG_DEPTH):
        if commit.hash == after:
            return out
        if commit.meta.get("kind") != "undo" and commit.hash not in undone:
            out.append(commit)
    raise RatuiError("RAT-UNDO-003", f"commit {after[:12]} is not among the last {LOG_DEPTH} commits of {ref}",
                     details={"ref": ref})


def _plan_delete(state: ProjectState, entry: Entry) -> UndoPlan:
    name = entry.ref
    if any(r.name == name for r in state.catalog.list_refs()):
        raise RatuiError("RAT-UNDO-002", f"cannot undo '{entry.summary}': a new branch {name} was created since",
                         details={"ref": name, "commits": [state.catalog.get_ref(name).head], "entry": entry.id})
    pointers: dict[str, str] = entry.data.get("pointers") or {}
    tables = [TableUndo(k, branches.TableState(None), branches.table_state(state, v))
              for k, v in sorted(pointers.items())]
    saved = entry.data.get("ledger") or {}
    return UndoPlan(entry, f"undo delete: branch {name} comes back at {str(entry.after)[:12]}", tables,
                    len(saved.get("loads") or []), "loaded on the branch again")


def _plan_reset(state: ProjectState, entry: Entry) -> UndoPlan:
    saved = entry.data.get("ledger") or {}
    from ratui.engine.state.db import open_db

    conn = open_db(state.settings.db_path)
    try:
        moved = state.ledger.moved_on(conn, saved)
    finally:
        conn.close()
    if moved:
        runs = sorted({r for _, r in moved if r})
        raise RatuiError("RAT-UNDO-002", f"cannot undo '{entry.summary}': {len(moved)} of its file(s) were loaded "
                         "again since" + (f" by run(s) {', '.join(runs[:5])}" if runs else "") +
                         f": {', '.join(f for f, _ in moved[:5])}",
                         details={"runs": runs, "files": [f for f, _ in moved], "entry": entry.id})
    return UndoPlan(entry, f"undo {entry.summary}", [], len(saved.get("files") or []),
                    "back to their state before the reset")


def apply(state: ProjectState, planned: UndoPlan) -> dict[str, Any]:
    """Do what the plan says, as one recorded action; the plan is checked again first (RAT-UNDO-002/003, or
    RAT-CAT-003 when a table moved meanwhile: nothing changed). Returns what was done."""
    entry = planned.entry
    fresh = state.journal.last_undoable(planned.scope)
    if fresh is None or fresh.id != entry.id:
        raise RatuiError("RAT-UNDO-003", f"the journal changed since the undo was planned (entry {entry.id}): "
                         "plan it again", details={"entry": entry.id})
    again = plan(state, planned.scope)  # the ref or the ledger may have moved since the dialog was opened
    text = f"undo {entry.kind}: {entry.summary}"
    if entry.kind in REF_KINDS:
        ref = entry.ref
        tables = sorted(again.restore)
        head = state.catalog.get_ref(ref).head
        since = before_time(state, ref, entry.before or "")  # read before the transaction opens

        def ledger(conn: Any, commit: Commit) -> None:
            if entry.kind == "rollback":
                state.ledger.put_back(conn, entry.data.get("ledger") or {})
            else:
                state.ledger.unload_after(conn, ref, tables, since)
            journal.add(conn, "undo", ref, text, before=commit.parent or head, after=commit.hash,
                        data={"tables": tables}, undoes=entry.id)
            if entry.kind == "run" and entry.data.get("run_id"):  # the run's own log says its merge is undone
                record.log_in_tx(conn, entry.data["run_id"], "warning",
                                 f"its merge into {ref} was undone (commit {commit.hash[:12]}): {ref} holds "
                                 f"{', '.join(tables)} as before the run")

        commit = state.catalog.restore(ref, again.restore, again.expected, text,
                                       {"kind": "undo", "undoes": entry.kind, "tables": tables}, in_tx=ledger)
        return {"undone": entry.to_dict(), "commit": commit.hash, "tables": tables, "ledger_rows": again.ledger}
    if entry.kind == "delete":
        name = entry.ref

        def back(conn: Any) -> None:
            state.ledger.put_back(conn, entry.data.get("ledger") or {})
            journal.add(conn, "undo", name, text, after=entry.after, undoes=entry.id)

        state.catalog.revive_branch(name, entry.after or "", entry.data.get("pointers") or {}, in_tx=back)
        return {"undone": entry.to_dict(), "branch": name, "head": entry.after,
                "tables": sorted(entry.data.get("pointers") or {}), "ledger_rows": again.ledger}
    from ratui.engine.state.db import open_db, write_tx

    conn = open_db(state.settings.db_path)
    try:
        with write_tx(conn):
            moved = state.ledger.moved_on(conn, entry.data.get("ledger") or {})
            if moved:
                raise RatuiError("RAT-UNDO-002", f"cannot undo '{entry.summary}': {len(moved)} file(s) were loaded "
                                 "again meanwhile", details={"files": [f for f, _ in moved], "entry": entry.id})
            changed = state.ledger.put_back(conn, entry.data.get("ledger") or {})
            journal.add(conn, "undo", entry.ref, text, undoes=entry.id)
    finally:
        conn.close()
    return {"undone": entry.to_dict(), "ledger_rows": changed}
