"""Atomic publish: a selection of pipelines lands on its ref in one commit, or not at all.

    publish = AtomicPublish.start(state, compiled, invocation_id, into="main")   # publish-{invocation} from main
    ... the invocation (its `publisher`) runs every run from the publish branch into it (downstream runs read
        their upstream's new tables there) ...
    outcome = publish.finish(invocation)                        # the invocation calls it after its last run

If every run succeeded or was unchanged, the publish branch merges into `into` (Nessie's rule: a table `into`
changed meanwhile is a conflict and nothing lands, unless both sides only appended to it: then it merges by append
once its quality tests pass on the combined rows) with the landing files its runs loaded, and is deleted. If a run
failed, was cancelled or never ran, `into` is untouched and the branch is kept so its tables can be looked at
(`ratui query --ref publish-...`); the reaper's orphan-branch task deletes it after the usual age.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

from ratui.engine.errors import RatuiError
from ratui.engine.ops import branches
from ratui.engine.run.results import PublishOutcome

if TYPE_CHECKING:
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.run.results import RunResult
    from ratui.engine.state.project_state import ProjectState


class Published(Protocol):
    """What a publish needs to know of the invocation that ran on its branch (invocation.py's Invocation)."""

    ref: str  # the publish branch
    publish_into: str | None
    keys: list[str]
    results: list["RunResult"]
    error: BaseException | None

    @property
    def cancelled(self) -> bool: ...


def publish_branch(invocation_id: str) -> str:
    return f"{branches.PUBLISH_PREFIX}{invocation_id}"


class AtomicPublish:
    """The publisher of one invocation (run/invocation.py's Publisher): its branch, and the merge at its end with
    the quality gate of tables that merge by append (run/merge_gate.py) on the project the invocation ran."""

    def __init__(self, state: ProjectState, compiled: CompiledProject, branch: str, into: str):
        self.state = state
        self.compiled = compiled
        self.branch = branch
        self.into = into

    @classmethod
    def start(cls, state: ProjectState, compiled: CompiledProject, invocation_id: str, into: str) -> "AtomicPublish":
        """The publish branch from `into` (its ledger included); `into` must be writable (RAT-CAT-002/-007/-012)."""
        branches.check_writable(state, into)
        name = publish_branch(invocation_id)
        state.catalog.create_branch(name, from_ref=into, in_tx=lambda conn: state.ledger.fork(conn, into, name))
        return cls(state, compiled, name, into)

    def finish(self, invocation: Published) -> PublishOutcome:
        from ratui.engine.run.merge_gate import quality_gate  # Spark's side: loaded when a publish ends

        compiled = self.compiled
        return finish_publish(self.state, invocation,
                              verify=quality_gate(self.state, lambda: compiled, self.into, self.branch))


def finish_publish(state: ProjectState, invocation: Published,
                   verify: Callable[[str, list[str]], None] | None = None) -> PublishOutcome:
    """Never raises: a failure to publish is the outcome's error, and `into` is unchanged. `verify`: the quality
    gate of tables that merge by append (ops/branches.merge: a table `into` changed meanwhile that both sides only
    appended to lands by append once its tests pass on the combined rows; without it, a conflict)."""
    branch, into = invocation.ref, invocation.publish_into or "main"
    results = invocation.results
    bad = [r for r in results if r.status != "success" and not (r.status == "skipped" and r.run_type == "skip"
                                                                 and not r.error)]
    missing = len(results) < len(invocation.keys)

    def pending() -> list[str]:  # what would have landed (said when it did not)
        try:
            return [c.table for c in state.catalog.diff(branch, into)]
        except RatuiError:
            return []

    if invocation.cancelled or bad or missing or invocation.error is not None:
        why = (f"{len(bad)} of {len(invocation.keys)} pipeline(s) did not succeed: "
               + ", ".join(f"{r.pipeline} ({r.status})" for r in bad[:5]) if bad else
               "the publish was cancelled" if invocation.cancelled else "not every pipeline ran")
        return PublishOutcome(branch, into, False, pending(), f"{into} unchanged: {why}; {branch} kept for inspection")
    try:
        result = branches.merge(state, branch, into=into, kind="publish",
                                message=f"publish {len(invocation.keys)} pipeline(s) into {into}", verify=verify)
    except RatuiError as exc:
        return PublishOutcome(branch, into, False, pending(), f"{into} unchanged: {exc.message}; {branch} kept",
                              error=exc.to_dict())
    except Exception as exc:  # noqa: BLE001 - never lose the invocation over it; say what happened
        return PublishOutcome(branch, into, False, pending(), f"{into} unchanged: {type(exc).__name__}: {exc}",
                              error=RatuiError("RAT-RUN-002", str(exc)).to_dict())
    try:
        branches.delete(state, branch)
    except RatuiError:
        pass  # the reaper removes it
    if result.commit is None:
        return PublishOutcome(branch, into, True, [], f"nothing to publish: {into} already has every table")
    return PublishOutcome(branch, into, True, result.tables,
                          f"published {len(result.tables)} table(s) into {into} in one commit",
                          result.commit.hash)
