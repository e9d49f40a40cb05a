"""What `Project.run` gives back: a typed RunResult (one PipelineRun per pipeline), or a RunHandle to a run in the
background (wait=False).

The records are built from each run's row in the history (the same the CLI's `ratui show` reads), so a run's
phases, quality tests, error and whether it merged are told the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ratui.api import html
from ratui.api.records import Records, RunError
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import PHASES

if TYPE_CHECKING:
    from ratui.engine.run.invocation import Invocation
    from ratui.engine.run.results import RunResult as EngineResult


@dataclass(frozen=True)
class Phase:
    name: str  # branch | config | build | write | quality | resolve
    duration_ms: int
    status: str | None  # done | failed | cancelled (None: not recorded)


@dataclass(frozen=True)
class TestResult:
    """One quality test of a run: `violations` rows broke it; severity error blocks the merge, warn does not."""

    __test__ = False  # not a pytest class

    test: str
    severity: str  # error | warn
    status: str  # passed | failed | warned | error
    violations: int
    duration_ms: int
    file: str
    error: str | None = None


@dataclass(frozen=True)
class PipelineRun:
    """One pipeline's run: its record in the history, typed."""

    run_id: str
    pipeline: str
    status: str  # success | failed | cancelled | skipped
    ref: str  # the branch it merged (or was to merge) into
    merged: bool  # its data landed on `ref`
    run_type: str | None  # skip | rebuild | incremental | full
    reason: str | None
    strategy: str | None
    rows_written: int
    duration_ms: int
    warnings: int
    phases: tuple[Phase, ...]
    tests: tuple[TestResult, ...]
    error: RunError | None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """It succeeded, or it was skipped because nothing changed."""
        return self.status == "success" or (self.status == "skipped" and self.run_type == "skip" and not self.error)

    @classmethod
    def of(cls, result: "EngineResult", record: dict[str, Any] | None, ref: str) -> "PipelineRun":
        record = record or {}
        durations = record.get("phases") or result.phases or {}
        states = record.get("phase_status") or {}
        phases = tuple(Phase(p, int(durations[p]), states.get(p)) for p in PHASES if p in durations)
        quality = record.get("quality") or result.quality or []
        tests = tuple(TestResult(q.get("test", ""), q.get("severity", ""), q.get("status", ""),
                                 int(q.get("violations") or 0), int(q.get("duration_ms") or 0), q.get("file", ""),
                                 q.get("error")) for q in quality)
        return cls(result.run_id, result.pipeline, result.status, record.get("ref") or ref,
                   bool(record.get("merged_at")), result.run_type, result.reason, result.strategy,
                   int(result.rows_written or 0), int(result.duration_ms or 0), int(result.warnings or 0), phases,
                   tests, RunError.of(result.error), tuple(result.notes or ()))


PIPELINE_RUN_COLUMNS = ("pipeline", "status", "merged", "run_type", "rows_written", "duration_ms", "warnings",
                        "error")


@dataclass(frozen=True)
class RunResult:
    """What one `run()` did: a PipelineRun per selected pipeline, in the order they ended.

    status: "success" when every pipeline succeeded or was unchanged (skipped), "cancelled" when runs were
    cancelled and none failed, else "failed". `merged`: every pipeline that ran landed a commit on the ref (and,
    with atomic=True, the publish merged); a run that succeeded with nothing new to write (an incremental run whose
    batch was empty: see its notes) lands nothing, so it is not merged. `errors`: the coded errors of the runs that
    did not succeed."""

    ref: str
    runs: tuple[PipelineRun, ...]
    published: bool | None = None  # atomic=True: whether the one commit landed
    publish_reason: str | None = None

    @property
    def status(self) -> str:
        if all(r.ok for r in self.runs) and self.published is not False:
            return "success"
        if any(r.status == "cancelled" for r in self.runs) and not any(r.status == "failed" for r in self.runs):
            return "cancelled"
        return "failed"

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def merged(self) -> bool:
        ran = [r for r in self.runs if r.status != "skipped"]
        return self.published is not False and bool(ran) and all(r.merged for r in ran)

    @property
    def errors(self) -> list[RunError]:
        return [r.error for r in self.runs if r.error is not None]

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    def __getitem__(self, pipeline: str) -> PipelineRun:
        """The run of one pipeline: its key, layer.name or name."""
        for r in self.runs:
            if r.pipeline == pipeline or r.pipeline.endswith("." + pipeline):
                return r
        raise RatuiError("RAT-API-002", f"no run of '{pipeline}' in this result: "
                         + (", ".join(r.pipeline for r in self.runs) or "it has none"))

    def __iter__(self):
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def raise_for_status(self) -> "RunResult":
        """Raise the first run's error (a RatuiError) unless every run is ok; returns self otherwise."""
        if not self.ok:
            first = next((e for e in self.errors), None)
            if first is not None:
                raise first.exception()
            raise RatuiError("RAT-RUN-002", f"the runs on {self.ref} ended {self.status}"
                             + (f": {self.publish_reason}" if self.publish_reason else ""))
        return self

    def _repr_html_(self) -> str:
        caption = f"{len(self.runs)} run(s) on {self.ref}: {self.status}" + (" (merged)" if self.merged else "")
        return html.records(Records(self.runs), PIPELINE_RUN_COLUMNS, caption=caption)


def result_of(state: Any, invocation: "Invocation", ref: str) -> RunResult:
    """The typed result of an ended invocation, from its runs' records."""
    history = state.history
    runs = tuple(PipelineRun.of(r, history.get_run(r.run_id), ref) for r in invocation.results)
    publish = invocation.publish
    return RunResult(ref, runs, publish.merged if publish is not None else None,
                     publish.reason if publish is not None else None)


def run_in_engine(project: Any, keys: list[str], *, ref: str, **flags: Any) -> RunResult | None:
    """`run(wait=True)` answered by the project's running warm engine (ratui/warm/api_served.py) when this process
    has not started Spark: the same invocation there, recorded with trigger "api", its RunResult built here from the
    same records. None: it runs in this process (no engine runs, another environment, Spark started here)."""
    import json

    from ratui.api.engine_calls import answered
    from ratui.engine.run.results import RunResult as EngineResult

    def read_results(fd: int) -> dict:
        with open(fd, encoding="utf-8", closefd=False) as source:
            return json.load(source)

    body = answered(project.root, {"api": "run", "keys": keys, "ref": ref, **flags}, "ran", read_results)
    if body is None:
        return None
    history = project._engine_state().history
    results = [EngineResult(**r) for r in body["results"]]
    runs = tuple(PipelineRun.of(r, history.get_run(r.run_id), ref) for r in results)
    publish = body.get("publish")
    return RunResult(ref, runs, publish["merged"] if publish else None, publish["reason"] if publish else None)


class RunHandle:
    """Runs going on in the background (`run(..., wait=False)`): `status`, `run_ids`, `cancel()`, `wait()`.

    They are recorded in the history as they go, so `ratui runs` and an open console (any process) show them live."""

    def __init__(self, project: Any, invocation: "Invocation", ref: str):
        self._project = project
        self._invocation = invocation
        self.ref = ref

    @property
    def run_ids(self) -> list[str]:
        """The runs so far (each is queued when its turn comes; the first at once)."""
        return list(self._invocation.run_ids)

    @property
    def done(self) -> bool:
        return self._invocation.done

    @property
    def status(self) -> str:
        """running until every run ended, then the result's status (success | failed | cancelled)."""
        if not self._invocation.done:
            return "running"
        return self.result().status

    def cancel(self) -> str:
        """Stop: the runs in flight are interrupted (their branches deleted, main unchanged), the others never
        start. Returns 'requested', or 'finished' when they had ended already."""
        return self._invocation.cancel()

    def wait(self, timeout: float | None = None) -> RunResult:
        """The RunResult once every run ended; RAT-API-004 if they are still going after `timeout` seconds."""
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                    or timeout < 0):
            raise RatuiError("RAT-API-002", f"timeout must be a number of seconds (0 or more), got {timeout!r}")
        if not self._invocation.wait(timeout):
            raise RatuiError("RAT-API-004", f"{len(self.run_ids)} run(s) on {self.ref} still going after "
                             f"{timeout} s: {', '.join(self.run_ids)}")
        return self.result()

    def result(self) -> RunResult:
        if not self._invocation.done:
            raise RatuiError("RAT-API-004", f"the runs on {self.ref} have not ended: wait() for them")
        error = self._invocation.error
        if isinstance(error, RatuiError):
            raise error
        if error is not None:
            raise RatuiError("RAT-RUN-002", f"the invocation failed: {type(error).__name__}: {error}") from error
        return result_of(self._project._engine_state(), self._invocation, self.ref)

    def _repr_html_(self) -> str:
        if self.done:
            return self.result()._repr_html_()
        return html.table(["run_id"], [[r] for r in self.run_ids], caption=f"running on {self.ref}")

    def __repr__(self) -> str:
        return f"<RunHandle {self.status} on {self.ref}: {', '.join(self.run_ids)}>"


__all__ = ["Phase", "TestResult", "PipelineRun", "RunResult", "RunHandle"]
