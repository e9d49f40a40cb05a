"""The runner's Prometheus metrics (prometheus_client), served as `/metrics` beside `/healthz` on its port, behind
the same door (token, Host, Origin).

What the runner's process sees, from its Engine's events: every run it ends (its schedules' runs, and the shell's
commands it serves): runs by pipeline, status and trigger, their durations and their phases' as histograms, rows
written, quality failures; and, read when scraped: each table's freshness age, the runs in flight, whether this
runner holds the lease and when it last looped. Counters start at zero when the runner starts (Prometheus's
`rate()` and `increase()` handle the restart).

    metrics = RunnerMetrics(engine, runner.status, freshness=lambda: engine.freshness())
    text, content_type = metrics.exposition()
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ratui.engine.events import Event, PhaseFinished, QualityResultEvent, RunFinished, RunQueued

RUN_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)
PHASE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800)
MAX_TRACKED = 100_000  # runs queued and not yet ended, remembered for their pipeline and trigger


class RunnerMetrics:
    def __init__(self, engine: Any, status: Callable[[], dict[str, Any]],
                 freshness: Callable[[], list[dict[str, Any]]]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self.status, self.freshness = status, freshness
        self.runs = Counter("ratui_runs", "Runs this runner's process ended, by pipeline, status and trigger",
                            ["pipeline", "status", "trigger"], registry=self.registry)
        self.run_seconds = Histogram("ratui_run_duration_seconds", "Run durations (queued to ended), by pipeline",
                                     ["pipeline"], buckets=RUN_BUCKETS, registry=self.registry)
        self.phase_seconds = Histogram("ratui_phase_duration_seconds", "Phase durations, by phase",
                                       ["phase"], buckets=PHASE_BUCKETS, registry=self.registry)
        self.rows = Counter("ratui_rows_written", "Rows written by successful runs, by pipeline", ["pipeline"],
                            registry=self.registry)
        self.quality = Counter("ratui_quality_failures", "Quality tests that failed or warned, by pipeline and "
                               "severity", ["pipeline", "severity"], registry=self.registry)
        self._runs: dict[str, tuple[str, str]] = {}  # run id -> (pipeline, trigger), while it goes
        self._lock = threading.Lock()
        self.registry.register(_ReadWhenScraped(self))
        self.unsubscribe = engine.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunQueued):
            with self._lock:
                if len(self._runs) < MAX_TRACKED:
                    self._runs[event.run_id] = (event.pipeline, event.trigger)
        elif isinstance(event, RunFinished):
            with self._lock:
                _, trigger = self._runs.pop(event.run_id, (event.pipeline, "unknown"))
            self.runs.labels(event.pipeline, event.status, trigger).inc()
            if event.status != "skipped":
                self.run_seconds.labels(event.pipeline).observe(max(0, event.duration_ms) / 1000)
            if event.status == "success":
                self.rows.labels(event.pipeline).inc(max(0, event.rows_written or 0))
        elif isinstance(event, PhaseFinished) and event.status == "done":
            self.phase_seconds.labels(event.phase).observe(max(0, event.duration_ms) / 1000)
        elif isinstance(event, QualityResultEvent) and event.status in ("failed", "warned", "error"):
            with self._lock:
                pipeline = self._runs.get(event.run_id, ("unknown", ""))[0]
            self.quality.labels(pipeline, event.severity).inc()

    def in_flight(self) -> int:
        with self._lock:
            return len(self._runs)

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _ReadWhenScraped:
    """The gauges read at each scrape: freshness per table, runs in flight, the lease, the last loop."""

    def __init__(self, metrics: RunnerMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list:
        return []  # read when scraped: nothing to describe up front

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        age = GaugeMetricFamily("ratui_freshness_age_seconds", "Seconds since the table's last successful run on "
                                "main (tables with a freshness; a table never built is left out)", labels=["pipeline"])
        stale = GaugeMetricFamily("ratui_freshness_stale", "1 when the table is past its bound (state warn or error)",
                                  labels=["pipeline", "state"])
        try:
            rows = self.metrics.freshness()
        except Exception:  # a project that does not compile right now: no freshness this scrape
            rows = []
        for row in rows:
            if row["age_seconds"] is not None:
                age.add_metric([row["pipeline"]], row["age_seconds"])
            stale.add_metric([row["pipeline"], row["state"]], 0.0 if row["state"] == "fresh" else 1.0)
        yield age
        yield stale
        status = self.metrics.status()
        yield GaugeMetricFamily("ratui_runs_in_flight", "Runs queued or running in this runner's process",
                                value=self.metrics.in_flight())
        yield GaugeMetricFamily("ratui_runner_holding_lease", "1 while this runner holds the project's lease",
                                value=1.0 if status.get("holding_lease") else 0.0)
        last = status.get("last_loop")
        if last:
            from datetime import datetime

            yield GaugeMetricFamily("ratui_runner_last_loop_timestamp_seconds", "When the runner last looped",
                                    value=datetime.fromisoformat(last).timestamp())
        yield GaugeMetricFamily("ratui_runner_scrape_timestamp_seconds", "When this scrape was answered",
                                value=time.time())
        memory = GaugeMetricFamily("ratui_process_resident_bytes", "Resident memory of the runner's Python process "
                                   "and of the JVMs it started (Spark's)", labels=["process"])
        python, jvm = _resident()
        memory.add_metric(["python"], python)
        memory.add_metric(["jvm"], jvm)
        yield memory


def _resident() -> tuple[float, float]:
    import psutil

    me = psutil.Process()
    jvm = 0.0
    for child in me.children(recursive=True):
        try:
            if "java" in child.name():
                jvm += child.memory_info().rss
        except psutil.Error:
            pass
    return float(me.memory_info().rss), jvm
