"""Live run state: what the console knows about each run, built from engine events or a history record.

The App owns one `RunStore`. Engine events reach it (coalesced) on the event loop; screens read it. A run
opened from the history (finished, or running in another process) is built with `LiveRun.from_history`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from ratui.engine.events import (
    Event, LogLine, PhaseFinished, PhaseStarted, QualityResultEvent, RunDecided, RunFinished, RunIsolated, RunQueued,
    RunStarted, SparkProgress, StagingProgress,
)
from ratui.console.format import outcome
from ratui.engine.vocabulary import FINAL, PHASES

if TYPE_CHECKING:
    from ratui.console.controller import EngineItem

LOG_LIMIT = 2000


@dataclass
class PhaseState:
    name: str
    state: str = "waiting"  # waiting | running | done | failed | cancelled | skipped
    duration_ms: int | None = None
    started: float | None = None  # monotonic clock, while running
    prior_ms: int = 0  # time spent in earlier attempts (a merge conflict re-runs the run)


@dataclass
class LogEntry:
    at: str  # HH:MM:SS
    level: str
    message: str


@dataclass
class LiveRun:
    run_id: str
    pipeline: str
    status: str = "pending"
    trigger: str | None = None
    strategy: str | None = None
    branch: str | None = None
    ref: str = "main"  # the branch it merges into
    rows_written: int | None = None
    duration_ms: int | None = None
    warnings: int = 0
    error: dict[str, Any] | None = None
    started: float | None = None  # monotonic
    started_at: str | None = None  # ISO text, from history
    batch: str | None = None
    reason: str | None = None  # why it ran or was skipped
    run_type: str | None = None  # skip | rebuild | incremental | full (vocabulary.RUN_TYPES)
    isolation: str | None = None  # a Python pipeline's, as applied (isolation/levels.py)
    live: bool = True  # False: built from a history record
    phases: dict[str, PhaseState] = field(default_factory=lambda: {p: PhaseState(p) for p in PHASES})
    quality: list[dict[str, Any]] = field(default_factory=list)
    diff: dict[str, Any] | None = None  # the run's data diff (engine/run/data_diff.py), once it has one
    logs: deque = field(default_factory=lambda: deque(maxlen=LOG_LIMIT))
    # while an object-store zone is fetched: (zone, objects done, of how many)
    staging: tuple[str, int, int] | None = None
    # while a phase runs Spark jobs: their stages and tasks (None when no job runs)
    spark: SparkProgress | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINAL

    @property
    def outcome(self) -> str:
        """success | warned | unchanged | upstream | failed | cancelled (format.outcome)."""
        return outcome(self.status, self.warnings, self.reason, self.error)

    @property
    def current_phase(self) -> str | None:
        for phase in self.phases.values():
            if phase.state == "running":
                return phase.name
        return None

    def elapsed_ms(self, now: float) -> int | None:
        if self.duration_ms is not None:
            return self.duration_ms
        if self.started is None:
            return None
        return int((now - self.started) * 1000)

    # ------------------------------------------------------------------------------------------ events

    def apply(self, event: Event, now: float, clock_text: str) -> None:
        if isinstance(event, RunQueued):
            self.trigger = event.trigger
            self.ref = event.ref
        elif isinstance(event, RunStarted):
            self.status = "running"
            self.branch = event.branch
            self.started = now
        elif isinstance(event, PhaseStarted):
            phase = self.phases.setdefault(event.phase, PhaseState(event.phase))
            phase.prior_ms = phase.duration_ms or 0
            phase.state, phase.started = "running", now
            if self.status == "pending":
                self.status = "running"
        elif isinstance(event, SparkProgress):
            self.spark = event if event.jobs_running and not self.finished else None
        elif isinstance(event, RunDecided):
            self.run_type, self.reason = event.run_type, event.reason
        elif isinstance(event, RunIsolated):
            self.isolation = event.isolation
        elif isinstance(event, StagingProgress):
            self.staging = (event.zone, event.done, event.total) if event.done < event.total else None
        elif isinstance(event, PhaseFinished):
            self.staging = None
            self.spark = None
            phase = self.phases.setdefault(event.phase, PhaseState(event.phase))
            phase.state = event.status if event.status in ("done", "failed", "cancelled", "skipped") else "done"
            phase.duration_ms = phase.prior_ms + event.duration_ms
            phase.started = None
        elif isinstance(event, QualityResultEvent):
            self.quality.append({"test": event.test, "severity": event.severity, "status": event.status,
                                 "violations": event.violations, "duration_ms": event.duration_ms})
        elif isinstance(event, LogLine):
            self.logs.append(LogEntry(clock_text, event.level, event.message))
        elif isinstance(event, RunFinished):
            self.spark = None
            self.status = event.status
            self.reason = event.reason or self.reason
            if event.status == "skipped":
                self.run_type = "skip"
            self.rows_written = event.rows_written
            self.duration_ms = event.duration_ms
            self.error = event.error
            self.warnings = event.warnings
            self.diff = event.diff or self.diff
            for name, ms in (event.phases or {}).items():
                phase = self.phases.setdefault(name, PhaseState(name))
                phase.duration_ms = ms
            self._settle_phases()

    def _settle_phases(self) -> None:
        """After the end: a phase still running ended the way the run did; one never reached was skipped."""
        for phase in self.phases.values():
            if phase.state == "running":
                phase.state = {"success": "done", "cancelled": "cancelled"}.get(self.status, "failed")
                phase.started = None
            elif phase.state == "waiting":
                phase.state = "skipped" if self.status != "success" else "done"

    # ----------------------------------------------------------------------------------------- history

    @classmethod
    def from_history(cls, run: dict[str, Any]) -> "LiveRun":
        live = cls(run["id"], run["pipeline"], status=run.get("status") or "pending", trigger=run.get("trigger"),
                   strategy=run.get("strategy"), branch=run.get("branch"), ref=run.get("ref") or "main",
                   rows_written=run.get("rows_written"),
                   duration_ms=run.get("duration_ms"), warnings=run.get("warnings") or 0,
                   started_at=run.get("started_at"), reason=run.get("reason"), run_type=run.get("run_type"),
                   isolation=run.get("isolation"), live=False)
        if run.get("error_code"):
            live.error = {"code": run["error_code"], "message": run.get("error_message"),
                          "file": run.get("error_file"), "line": run.get("error_line"), "hint": run.get("error_hint")}
        phases = run.get("phases") or {}
        ran = [p for p in PHASES if p in phases]
        last = ran[-1] if ran else None
        for name in PHASES:
            phase = live.phases[name]
            if name in phases:
                phase.duration_ms = phases[name]
                phase.state = "done"
                if name == last and live.status in ("failed", "cancelled"):
                    phase.state = live.status
                elif name == last and live.status == "running":
                    phase.state = "running"
            elif live.status in ("failed", "cancelled", "skipped"):
                phase.state = "skipped"
        live.quality = [{k: q.get(k) for k in ("test", "severity", "status", "violations", "duration_ms")}
                        for q in run.get("quality") or []]
        live.diff = run.get("diff") if isinstance(run.get("diff"), dict) else None
        for entry in run.get("logs") or []:
            at = entry.get("at") or ""
            live.logs.append(LogEntry(at[11:19] if len(at) >= 19 else at, entry.get("level") or "info",
                                      entry.get("message") or ""))
        return live

    def profile(self) -> list[tuple[str, int]]:
        """(phase, ms) for the phases that took time, in run order: the phase profile."""
        return [(p.name, p.duration_ms) for p in self.phases.values() if p.duration_ms is not None]


class RunStore:
    """Every run the console has seen live, by id. Lives on the event loop: not thread-safe by design."""

    def __init__(self) -> None:
        self.runs: dict[str, LiveRun] = {}

    def get(self, run_id: str) -> LiveRun | None:
        return self.runs.get(run_id)

    def active(self) -> list[LiveRun]:
        return [r for r in self.runs.values() if not r.finished]

    def active_for(self, pipeline: str) -> list[LiveRun]:
        return [r for r in self.active() if r.pipeline == pipeline]

    def in_batch(self, batch: str) -> list[LiveRun]:
        return [r for r in self.runs.values() if r.batch == batch]

    def apply(self, items: Iterable["EngineItem"]) -> tuple[set[str], list[LiveRun]]:
        """Apply engine items (event, batch, monotonic time, wall clock text); return changed ids and runs that
        ended."""
        changed: set[str] = set()
        ended: list[LiveRun] = []
        for item in items:
            event, batch, now, clock_text = item.event, item.batch, item.at, item.clock_text
            run = self.runs.get(event.run_id)
            if run is None:
                pipeline = getattr(event, "pipeline", None) or "?"
                run = self.runs[event.run_id] = LiveRun(event.run_id, pipeline, batch=batch)
            elif batch and not run.batch:
                run.batch = batch
            was_finished = run.finished
            run.apply(event, now, clock_text)
            changed.add(event.run_id)
            if run.finished and not was_finished:
                ended.append(run)
        return changed, ended
