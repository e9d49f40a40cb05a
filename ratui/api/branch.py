"""A branch to work on from Python: runs merge into it instead of main, reads see it, and it merges by hand.

    with p.branch("dev-alice", from_="main") as b:
        b.run("silver.clean_orders+")          # each run forks from dev-alice and merges into it (not main)
        b.table("clean_orders").to_arrow()      # the branch's tables
        b.diff("main")                         # what differs from main
        b.merge(into="main")                   # by hand: all or nothing, conflicts refused

This is what the console's "work on a branch" does (its runs name the branch as their ref). The `with` block's rule,
like lakeFS's transact() but explicit: if the block raises and this `p.branch(...)` call created the branch, the
branch is deleted when the block is left (the exception goes on; what the block did not merge never reaches main:
runs on the branch merge into the branch only, and nothing is merged for you). If the branch existed before, or the
block ends normally, the branch is kept: merge it, or `b.delete()` it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ratui.api import html
from ratui.api.records import DIFF_COLUMNS, Records

if TYPE_CHECKING:
    from ratui.api.queries import Query
    from ratui.api.runs import RunHandle, RunResult
    from ratui.api.tables import Table


class Branch:
    """A branch of the project (see the module's docstring). `created`: this Branch's p.branch() call made it."""

    def __init__(self, project: Any, name: str, *, created: bool, from_: str):  # project: a Project (no import back)
        self.project = project
        self.name = name
        self.created = created
        self.from_ = from_
        self._handles: list[RunHandle] = []

    def __enter__(self) -> "Branch":
        self.project._check_open()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None or not self.created or self.project.closed:
            return None
        for handle in self._handles:  # a run in flight on it is stopped first (its own branch goes, too)
            if not handle.done:
                handle.cancel()
                handle._invocation.wait()
        if self.name in {r.name for r in self.project._engine.refs()}:
            self.project._engine.delete_branch(self.name)
        return None  # the exception propagates

    # ------------------------------------------------------------------------------------------- running

    def run(self, selector: str | Sequence[str] | None = None, *, wait: bool = True, full_refresh: bool = False,
            force: bool = False, atomic: bool = False, threads: int | None = None) -> "RunResult | RunHandle":
        """Project.run on this branch: each run forks from the branch and merges into it when its tests pass."""
        outcome = self.project.run(selector, wait=wait, ref=self.name, full_refresh=full_refresh, force=force,
                                   atomic=atomic, threads=threads)
        if not wait:
            self._handles.append(outcome)  # type: ignore[arg-type]
        return outcome

    # ------------------------------------------------------------------------------------------- reading

    def table(self, name: str, *, at: str | None = None) -> "Table":
        return self.project.table(name, ref=self.name, at=at)

    def sql(self, sql: str, *, at: str | None = None) -> "Query":
        return self.project.sql(sql, ref=self.name, at=at)

    def log(self, *, table: str | None = None, limit: int = 50) -> Records[Any]:
        return self.project.log(self.name, table=table, limit=limit)

    def diff(self, other: str | None = None) -> Records[Any]:
        """Per table, what differs from `other` (default: the ref the branch was created from)."""
        other = self.project._engine.branch_origin(self.name) if other is None else other
        return self.project.diff(self.name, other)

    # ------------------------------------------------------------------------------------------ changing

    def merge(self, into: str | None = None, *, dry_run: bool = False):
        """Merge the branch into `into` (default: the ref it was created from), like `ratui merge`; the branch
        stays. A table both sides changed since the fork is a conflict (RAT-CAT-003): nothing is merged."""
        return self.project.merge(self.name, into=into, dry_run=dry_run)

    def delete(self) -> None:
        """Delete the branch (its tables' files stay while another ref or a past commit holds them)."""
        self.project.delete_branch(self.name)

    @property
    def exists(self) -> bool:
        return self.name in {r.name for r in self.project.refs()}

    def _repr_html_(self) -> str:
        changes = self.diff()
        return html.records(changes, DIFF_COLUMNS, caption=f"branch {self.name} (from {self.from_}): "
                            f"{len(changes)} table(s) differ")

    def __repr__(self) -> str:
        return f"<Branch {self.name} from {self.from_}{' (created here)' if self.created else ''}>"
