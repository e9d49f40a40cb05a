"""The Engine's branches and refs: reading them, merging, creating and deleting branches, a ref's log and a
rollback (ops/branches.py does the work), and naming a ref or a table as a user types it."""

from __future__ import annotations

from ratui.engine.errors import RatuiError
from ratui.engine.facade.base import EngineBase
from ratui.engine.vocabulary import ACTIVE, MAIN, RUN_PREFIX


class BranchesPart(EngineBase):
    def refs(self) -> list:
        return self._state.catalog.list_refs()

    def table_pointers(self, ref: str = MAIN) -> dict[str, str]:
        return self._state.catalog.table_pointers(ref)

    def load_table(self, ref: str, key: str):
        return self._state.catalog.load_table(ref, key)

    def diff(self, ref: str, against: str = MAIN) -> list:
        return self._state.catalog.diff(ref, against)

    def merge(self, ref: str, *, into: str = MAIN, message: str | None = None, dry_run: bool = False):
        """Merge a branch into `into` by hand, with the landing files its merged pipelines loaded. A live run's
        branch is refused (RAT-CAT-009). Tables both sides only appended to merge by append, after their quality
        tests passed on the combined rows (run/merge_gate.py: RAT-CAT-013 if not; the other tables' tests are each
        run's own resolve phase)."""
        from ratui.engine.ops import branches
        from ratui.engine.run.merge_gate import quality_gate

        if not dry_run:
            self._refuse_live_branch(ref, "merge")
            active = self._state.history.active_on(ref)
            if active:  # e.g. a publish branch whose invocation has not ended: its runs still merge into it
                raise RatuiError("RAT-CAT-011", f"cannot merge {ref}: run {active[0]['id']} of "
                                 f"{active[0]['pipeline']} is still {active[0]['status']} on it")
        return branches.merge(self._state, ref, into=into, message=message, dry_run=dry_run,
                              verify=quality_gate(self._state, self.compile, into, ref))

    def branch_origin(self, ref: str) -> str:
        """The ref a branch was created from (where its merge goes by default); main for main, run branches,
        branches from before ratui recorded it, or when that ref is gone."""
        from ratui.engine.run.changes import branch_origin

        origin = branch_origin(self._state, ref) if ref != MAIN else None
        if origin is None:
            return MAIN
        name = origin[0].partition("@")[0]
        return name if name in {r.name for r in self.refs()} else MAIN

    def create_branch(self, name: str, *, from_ref: str = MAIN):
        """A dev branch (RAT-CAT-001 exists, -006 bad name, -012 reserved name, -010 unknown past state)."""
        from ratui.engine.ops import branches

        return branches.create(self._state, name, from_ref=from_ref)

    def delete_branch(self, ref: str) -> None:
        from ratui.engine.ops import branches

        self._refuse_live_branch(ref, "delete")
        if ref.startswith(branches.RUN_PREFIX):
            self._state.catalog.delete_branch(ref)  # a dead run's branch (the reaper's job too)
        else:
            branches.delete(self._state, ref)

    def diff_refs(self, left: str, right: str = MAIN) -> list:
        """Per table, what differs between two refs (or past states "ref@HASH"): see ops/branches.py."""
        from ratui.engine.ops import branches

        return branches.diff(self._state, left, right)

    def log(self, ref: str = MAIN, *, table: str | None = None, limit: int = 50, details: bool = True) -> list:
        """The ref's commits, newest first, with the tables each changed, the run, pipeline and version."""
        from ratui.engine.ops import branches

        if table is not None:
            table = self.resolve_table(table, ref)
        return branches.log(self._state, ref, table=table, limit=limit, details=details)

    def plan_rollback(self, ref: str, to: str, table: str | None = None):
        from ratui.engine.ops import branches

        if table is not None:
            table = self.resolve_table(table, ref)
        return branches.plan_rollback(self._state, ref, to, table)

    def rollback(self, plan):
        from ratui.engine.ops import branches

        return branches.rollback(self._state, plan)

    def resolve_ref(self, ref: str, at: str | None = None) -> str:
        """`ref` checked (a branch or "ref@HASH", returned with the whole hash); with `at` (a time) the ref's past
        state then, as "ref@HASH"."""
        from ratui.engine.ops.branches import parse_when
        from ratui.engine.state.catalog.base import split_spec

        catalog = self._state.catalog
        if at is None:
            catalog.get_ref(ref)
            name, commit = split_spec(ref)
            return ref if commit is None else f"{name}@{catalog.commit(ref).hash}"  # a prefix made whole
        name, _ = split_spec(ref)
        return f"{name}@{catalog.commit_at(name, parse_when(at)).hash}"

    def resolve_table(self, name: str, ref: str = MAIN) -> str:
        """"clean_orders", "silver.clean_orders" or the full key -> the table key (RAT-CAT-005 if none)."""
        keys = set(self._state.catalog.table_pointers(ref))
        if name in keys:
            return name
        matches = sorted(k for k in keys if k.endswith("." + name))
        if not matches:
            compiled = {k for k in self.compile().pipelines}
            matches = sorted(k for k in compiled if k == name or k.endswith("." + name))
        if len(matches) == 1:
            return matches[0]
        raise RatuiError("RAT-CAT-005", f"no table '{name}' at {ref}" if not matches else
                         f"'{name}' names {len(matches)} tables: {', '.join(matches)}")

    def live_run_of(self, ref: str) -> dict | None:
        """The run still going (in any process) that owns branch `ref`, if any."""
        if not ref.startswith(RUN_PREFIX):
            return None
        run = self._state.history.get_run(ref[len(RUN_PREFIX):])
        if run is None or run.get("id") != ref[len(RUN_PREFIX):] or run["status"] not in ACTIVE or run.get("merged_at"):
            return None
        return run

    def _refuse_live_branch(self, ref: str, what: str) -> None:
        run = self.live_run_of(ref)
        if run is not None:
            raise RatuiError("RAT-CAT-009", f"cannot {what} {ref}: run {run['id']} of {run['pipeline']} is still "
                             f"{run['status']} on it")
