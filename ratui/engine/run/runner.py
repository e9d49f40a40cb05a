"""What an invocation needs of the engine that runs its pipelines: a narrow interface, so that invocation.py
depends on these methods and not on the Engine class (engine.py creates invocations; invocations do not import it).
Engine implements it; a test or a tool could hand an invocation any object that does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ratui.engine.errors import RatuiError
    from ratui.engine.ops.changes import Decision
    from ratui.engine.project.compiler import CompiledProject
    from ratui.engine.project.discovery import Pipeline
    from ratui.engine.run.results import RunResult
    from ratui.engine.state.project_state import ProjectState


class Runner(Protocol):
    @property
    def state(self) -> "ProjectState": ...

    def queue_run(self, key: str, *, trigger: str, invocation: str | None, compiled: "CompiledProject",
                  ref: str = ...) -> str:
        """Record a pending run (cancellable before it starts); its id."""

    def new_skipped(self, key: str, *, trigger: str, invocation: str | None, compiled: "CompiledProject",
                    ref: str = ...) -> str:
        """The record of a run skipped without being queued; its id."""

    def decide(self, pipeline: "Pipeline", *, force: bool = ..., full_refresh: bool = ...,
               ref: str = ...) -> "Decision":
        """Change detection: whether the pipeline must run, and why."""

    def decide_unchanged(self, compiled: "CompiledProject", keys: list[str], *,
                         ref: str = ...) -> "dict[str, Decision]":
        """The pipelines of `keys` to skip, decided at once (their upstream in `keys` is unchanged too)."""

    def record_skips(self, items: list[tuple[str, str, str | None]], compiled: "CompiledProject", *, trigger: str,
                     invocation: str | None, ref: str = ...) -> "list[RunResult]":
        """(key, reason, queued run id or None) recorded as skipped, in one transaction."""

    def note_decision(self, run_id: str, decision: "Decision") -> None: ...

    def execute_run(self, run_id: str, key: str, *, full_refresh: bool = ..., ref: str = ...) -> "RunResult":
        """Run the six phases; never raises for the run's own failures."""

    def record_skip(self, run_id: str, key: str, compiled: "CompiledProject", reason: str,
                    error: "RatuiError | None") -> "RunResult": ...

    def record_not_started(self, run_id: str, reason: str) -> None: ...

    def cancel(self, run_id: str, error: "RatuiError | None" = ...) -> str: ...

    def cancel_local(self, run_id: str, error: "RatuiError | None" = ...) -> str | None: ...
