"""The Engine's runs: invocations started or run here, cancel and wait, crash recovery, and the run history read.

    invocation = engine.start(keys, trigger="console")   # in the background: run ids, cancel(), wait()
    results = engine.run(keys, trigger="cli")           # in this thread
    engine.cancel(run_id)                               # from any thread; `ratui cancel` from another process
"""

from __future__ import annotations

from typing import Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.facade.base import EngineBase
from ratui.engine.ops.branches import check_writable
from ratui.engine.ops.publish import AtomicPublish
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.run.backfill import Backfill
from ratui.engine.run.invocation import Invocation, OnResult, new_invocation_id
from ratui.engine.run.results import RunResult
from ratui.engine.vocabulary import MAIN


class RunsPart(EngineBase):
    def start(self, keys: list[str], *, trigger: str = "console", full_refresh: bool = False, force: bool = False,
              on_result: OnResult | None = None, on_done: Callable[[Invocation], None] | None = None,
              invocation_id: str | None = None, threads: int | None = None, ref: str = MAIN,
              atomic: bool = False, compiled: CompiledProject | None = None,
              schedule: str | None = None) -> Invocation:
        """Queue the pipelines and run them in a background thread; returns the invocation at once (its run ids
        are known already). `invocation_id` names it (its RunQueued events carry it). `threads`: how many
        independent pipelines run at once (default: ratui.yaml's run.threads). `ref`: the branch the runs merge
        into; `atomic`: all of them land on `ref` in one commit or none does (ops/publish.py). `compiled`: the
        compile the caller planned from (watch mode's), else the project is compiled now."""
        return self.invocation(keys, trigger=trigger, full_refresh=full_refresh, force=force, on_result=on_result,
                               on_done=on_done, invocation_id=invocation_id, threads=threads, ref=ref,
                               atomic=atomic, compiled=compiled, schedule=schedule).start()

    def run(self, keys: list[str], *, trigger: str = "cli", full_refresh: bool = False, force: bool = False,
            on_result: OnResult | None = None, threads: int | None = None, ref: str = MAIN,
            atomic: bool = False) -> list[RunResult]:
        """Run the pipelines in dependency order from the calling thread (up to `threads` at once, default
        ratui.yaml's run.threads); returns when every one has ended."""
        return self.invocation(keys, trigger=trigger, full_refresh=full_refresh, force=force, on_result=on_result,
                               threads=threads, ref=ref, atomic=atomic).run()

    def invocation(self, keys: list[str], *, trigger: str, full_refresh: bool = False, force: bool = False,
                   on_result: OnResult | None = None, on_done: Callable[[Invocation], None] | None = None,
                   invocation_id: str | None = None, threads: int | None = None, ref: str = MAIN,
                   atomic: bool = False, compiled: CompiledProject | None = None,
                   schedule: str | None = None) -> Invocation:
        """An invocation not started yet (start() or run() it). The ref is checked first (RAT-CAT-002/-007/-012);
        an atomic one creates its publish branch here. `compiled`: the compile the caller just made and selected
        from (else the project is compiled now): the one compile of the whole project the invocation and its runs
        use."""
        check_writable(self._state, ref)
        compiled = compiled or self.compile()
        invocation_id = invocation_id or new_invocation_id()
        publisher = AtomicPublish.start(self._state, compiled, invocation_id, ref) if atomic else None
        return Invocation(self._parts, compiled, keys, trigger=trigger, full_refresh=full_refresh, force=force,
                          on_result=on_result, on_done=on_done, invocation_id=invocation_id,
                          threads=threads or self.settings.run_threads, ref=ref, publisher=publisher,
                          schedule=schedule)

    def backfill(self, keys: list[str], start: str, end: str, *, resume: bool = False, atomic: bool = False,
                 threads: int | None = None, ref: str = MAIN, compiled: CompiledProject | None = None,
                 on_interval: Callable[..., None] | None = None) -> Backfill:
        """A backfill of the incremental_by_time pipelines among `keys` over [start, end) (run/backfill.py), not
        started yet (run() it). `resume`: only the intervals their tables on `ref` have not done. Bad input is
        refused first (RAT-BKF-001/-002/-003, the ref's RAT-CAT-002/-007/-012); an atomic one then creates its
        publish branch."""
        from ratui.engine.project import intervals
        from ratui.engine.run import backfill

        first, last = backfill.parse_range(start, end)
        check_writable(self._state, ref)
        compiled = compiled or self.compile()
        catalog = self._state.catalog

        def done_of(key: str) -> list:
            return intervals.done_of(catalog.load_table(ref, key) if catalog.table_exists(ref, key) else None)

        planned = backfill.plan(compiled, keys, first, last, done_of=done_of if resume else None)
        publisher = AtomicPublish.start(self._state, compiled, new_invocation_id(), ref) if atomic else None
        return Backfill(self._parts, compiled, planned, ref=ref, threads=threads or self.settings.run_threads,
                        publisher=publisher, on_interval=on_interval)

    def cancel(self, run_id: str, error: RatuiError | None = None) -> str:
        """Ask a run to stop, from any thread or process.

        Returns 'requested', 'finished' (too late: it already ended, or its merge has committed) or 'unknown'.
        The request is written to the database, so the process running the run honours it at its next
        checkpoint; a run of this process is also interrupted at once (its Spark jobs are cancelled).
        """
        return self._in_flight.cancel(run_id, error)

    def active_runs(self) -> list[str]:
        """Runs of this process that have not ended (queued ones included)."""
        return self._in_flight.active()

    def wait(self, run_id: str, timeout: float | None = None) -> bool:
        return self._in_flight.wait(run_id, timeout)

    # ------------------------------------------------------------------------------------ crash recovery

    def recover(self) -> list[str]:
        """Record the runs whose process died as failed (branches deleted, main untouched); returns their ids."""
        return self._recovery.recover()

    def start_monitor(self, interval: float = 2.0) -> None:
        """Long-lived processes: recover dead runs every `interval` seconds."""
        self._recovery.start_monitor(interval)

    def stop_monitor(self) -> None:
        self._recovery.stop_monitor()

    # ---------------------------------------------------------------------------------------- reading

    def runs(self, limit: int = 50, offset: int = 0, *, pipeline: str | None = None, status: str | None = None,
             text: str | None = None, ref: str | None = None) -> list[dict[str, Any]]:
        """Run history, newest first; `ref`: only runs that merge (or merged) into that branch."""
        return self._state.history.list_runs(limit, offset, pipeline=pipeline, status=status, text=text, ref=ref)

    def count_runs(self, *, pipeline: str | None = None, status: str | None = None, text: str | None = None) -> int:
        return self._state.history.count_runs(pipeline=pipeline, status=status, text=text)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One run with its quality results and log (a unique prefix of the id is enough)."""
        return self._state.history.get_run(run_id)

    def recent_runs(self, per_pipeline: int = 10, pipelines: list[str] | None = None) -> dict[str, list[dict]]:
        return self._state.history.recent_by_pipeline(per_pipeline, pipelines)

    def quality_results(self, limit: int = 200) -> list[dict[str, Any]]:
        return self._state.history.quality_results(limit)

    def definition_versions(self, compiled: CompiledProject, keys: list[str]) -> dict[str, str]:
        """The version each of these pipelines has now (the hash of its SQL or Python, config and tests, as a run
        records it): of those that compiled. Reads each one's config.yaml."""
        from ratui.engine.run.changes import definition_hashes, version_of

        out = {}
        for key in keys:
            pipeline = compiled.pipelines.get(key)
            if pipeline is not None and not pipeline.errors:
                out[key] = version_of(definition_hashes(pipeline))
        return out
