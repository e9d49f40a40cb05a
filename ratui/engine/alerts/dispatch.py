"""The alerts of one process's Engine: rules read against the runs it ends, sent on a thread of their own.

The Engine subscribes a Dispatcher to its events (facade/engine.py), so whichever ratui process ran a run (`ratui
run`, the console, the runner, the API, a warm engine) alerts about it, and no other does. For each run that ends
on a rule's ref and is selected by its `select`:

- the rule's state for the pipeline moves (failed: failing; succeeded: ok, or warned with quality warnings), in one
  transaction of state/alert_state.py; only the call that moved it alerts (a pipeline failing every 5 minutes
  alerts once, then once on its recovery);
- the alert waits `gather_seconds` for others; a channel with more than `digest_after` alerts then gets one digest
  (at most MAX_PENDING kept per channel, the rest counted: a storm of failures costs bounded memory);
- a channel past its `max_per_hour` records the alert as suppressed; a send that fails is retried `retries` times,
  waiting 1, 2, 4 ... s; every attempt's outcome is recorded (sent, failed with why, suppressed with why).

`flush(timeout)` (Engine.close) waits for what is pending, so a `ratui run` that fails has said so before it exits;
what is still pending past the timeout is recorded as suppressed, with why.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Mapping

from ratui.engine.alerts import channels as sending
from ratui.engine.alerts.message import RunOutcome, alert, digest, missed_alert, stale_alert, stuck_alert
from ratui.engine.events import Event, RunFinished, RunQueued
from ratui.engine.project.alert_terms import RUN_EVENTS, AlertRule, Alerts
from ratui.engine.state.alert_state import FAILED, SENT, SUPPRESSED, AlertState, Attempt

log = logging.getLogger("ratui.alerts")
MAX_PENDING = 500  # alerts kept per channel while they gather; more are counted in the digest
MAX_QUEUED_RUNS = 100_000  # runs queued and not yet ended, remembered for their ref and trigger
FLUSH_SECONDS = 30.0
BACKOFF_SECONDS = 1.0
GATHER_BOUND = 5  # a storm that goes on is sent in digests at least every 5 gather_seconds
FAILING, OK, WARNED = "failing", "ok", "warned"

Selected = Callable[[str | None], "set[str] | None"]  # a rule's select -> the pipelines it selects (None: all)


def rule_state(rule: AlertRule, run: RunOutcome) -> str | None:
    """The state a run puts a rule's pipeline in (None: it says nothing: skipped, cancelled)."""
    if run.status == "failed":
        return FAILING
    if run.status != "success":
        return None
    return WARNED if rule.on == "warn" and run.warnings else OK


def fires(rule: AlertRule, before: str | None, now: str) -> bool:
    if before == now:
        return False
    if rule.on == "failure":
        return now == FAILING
    if rule.on == "recovery":
        return now == OK and before == FAILING
    return now == WARNED  # warn


_ALL: "weakref.WeakSet[Dispatcher]" = weakref.WeakSet()  # this process's dispatchers (flush_all)
_HOOKED: list[bool] = []


def flush_all(timeout: float = FLUSH_SECONDS) -> None:
    """Every dispatcher of this process sends what is pending (the command line, once its command returns)."""
    for dispatcher in list(_ALL):
        dispatcher.flush(timeout)


def _flush_before_shutdown() -> None:
    """Once per process: flush_all as the interpreter starts to shut down, before its thread pools refuse work
    (Apprise sends through one; at atexit time it could not). concurrent.futures registers its own hook when
    imported; hooks run last registered first, so it is imported before ours is registered."""
    if _HOOKED:
        return
    _HOOKED.append(True)
    import concurrent.futures.thread  # noqa: F401 - its shutdown hook first, so ours runs before it

    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(flush_all)
    else:  # another Python: the plain atexit (an Apprise channel may then fail at exit, recorded as failed)
        import atexit

        atexit.register(flush_all)


class Dispatcher:
    def __init__(self, alerts: Alerts, state: AlertState, selected: Selected, project: str, root: Any,
                 env: Mapping[str, str] | None = None) -> None:
        self.alerts = alerts
        self.state = state
        self.selected = selected
        self.project, self.root = project, root
        self.env: Mapping[str, str] = os.environ if env is None else env
        self._queued: dict[str, tuple[str, str]] = {}  # run id -> (ref, trigger)
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._dropped: dict[str, int] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._hurry = threading.Event()  # flush: no more gathering, no backoff waits past the deadline
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._arrivals = 0
        self._deadline: float | None = None  # a flush's: no backoff wait goes past it
        _ALL.add(self)
        _flush_before_shutdown()
        self._seen_fresh: dict[tuple[str, str], str] = {}  # (rule, pipeline) -> the freshness state last recorded

    # ------------------------------------------------------------------------------------------ the runs
    def on_event(self, event: Event) -> None:
        """An Engine event (on the emitting thread: only a little SQLite here, never a send)."""
        if isinstance(event, RunQueued):
            with self._lock:
                if len(self._queued) < MAX_QUEUED_RUNS:
                    # an atomic run lands where its publish branch does: main's rules are about it
                    self._queued[event.run_id] = (event.publishes_into or event.ref, event.trigger)
        elif isinstance(event, RunFinished):
            with self._lock:
                ref, trigger = self._queued.pop(event.run_id, ("main", "cli"))
            error = event.error or {}
            message = str(error.get("message") or "").strip().splitlines()
            self.run_ended(RunOutcome(event.run_id, event.pipeline, event.status, ref, trigger, event.warnings,
                                      error.get("code"), message[0][:300] if message else None))

    def run_ended(self, run: RunOutcome) -> None:
        for rule in self.alerts.rules:
            if rule.on not in RUN_EVENTS or rule.ref not in ("*", run.ref):
                continue
            now = rule_state(rule, run)
            if now is None:
                continue
            chosen = self.selected(rule.select)
            if chosen is not None and run.pipeline not in chosen:
                continue
            before = self.state.change(rule.name, run.pipeline, now, run.run_id)
            if fires(rule, before, now):
                self._enqueue(rule, alert(rule.on, rule.name, run, self.project, self.root))

    def freshness_checked(self, rows: list[dict[str, Any]]) -> None:
        """The tables' freshness now (facade/freshness.py): a rule alerts when a table goes stale, or from a warning
        to an error, once per change; back to fresh, it is ready to alert again."""
        for rule in self.alerts.rules:
            if rule.on != "freshness":
                continue
            chosen = self.selected(rule.select)
            for row in rows:
                if chosen is not None and row["pipeline"] not in chosen:
                    continue
                now = row["state"]
                if self._seen_fresh.get((rule.name, row["pipeline"])) == now:
                    continue  # as the last check found it: no transaction (the runner checks every loop)
                self._seen_fresh[(rule.name, row["pipeline"])] = now
                before = self.state.change(rule.name, row["pipeline"], now, row.get("run_id") or "")
                if now != before and now in ("warn", "error") and not (before == "error" and now == "warn"):
                    self._enqueue(rule, stale_alert(rule.name, row, self.project, self.root))

    def runs_going(self, runs: list[dict[str, Any]], now: float | None = None) -> None:
        """The runs queued or running now (the runner, every loop): a `stuck` rule alerts once for each run that has
        gone longer than its `after`."""
        from ratui.engine.vocabulary import parse_time

        now = time.time() if now is None else now
        for rule in self.alerts.rules:
            if rule.on != "stuck":
                continue
            chosen = self.selected(rule.select)
            for run in runs:
                began = parse_time(run.get("started_at") or run.get("queued_at"))
                if began is None or (chosen is not None and run["pipeline"] not in chosen):
                    continue
                if rule.ref not in ("*", run.get("ref") or "main") or now - began.timestamp() <= rule.after:
                    continue
                if self.state.change(rule.name, f"run {run['id']}", "stuck", run["id"]) != "stuck":
                    self._enqueue(rule, stuck_alert(rule.name, run, now - began.timestamp(), rule.after,
                                                    self.project, self.root))

    def fires_missed(self, schedule: str, fires: list[tuple[str, str, str]]) -> None:
        """Fires of `schedule` the runner recorded as not run as planned: (fire time, action, reason) each, where
        action is dropped or skipped, or run with a reason that says it catches up missed fires."""
        for rule in self.alerts.rules:
            if rule.on == "missed" and fires:
                self._enqueue(rule, missed_alert(rule.name, schedule, fires, self.project, self.root))

    def _enqueue(self, rule: AlertRule, one: dict[str, Any]) -> None:
        with self._lock:
            for name in rule.notify:
                pending = self._pending.setdefault(name, [])
                if len(pending) < MAX_PENDING:
                    pending.append(one)
                else:
                    self._dropped[name] = self._dropped.get(name, 0) + 1
            self._idle.clear()
            self._arrivals += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._send_loop, name="ratui-alerts", daemon=True)
                self._thread.start()
        self._wake.set()

    # ------------------------------------------------------------------------------------------ sending
    def _send_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self._gather()
            with self._lock:
                batch, dropped = self._pending, self._dropped
                self._pending, self._dropped = {}, {}
            for name, items in batch.items():
                try:
                    self._deliver(name, items, dropped.get(name, 0))
                except Exception:  # never let one channel's surprise stop the others
                    log.exception("alerts to %s", name)
            with self._lock:
                if not self._pending:
                    self._idle.set()
                else:
                    self._wake.set()

    def _gather(self) -> None:
        """Until no alert came for `gather_seconds` (at most GATHER_BOUND times that), or a flush: the alerts of a
        storm of runs ending together go out as one digest."""
        quiet = self.alerts.gather_seconds
        began = time.monotonic()
        while quiet and not self._hurry.is_set() and time.monotonic() - began < GATHER_BOUND * quiet:
            seen = self._arrivals
            self._hurry.wait(quiet)
            if self._arrivals == seen:
                return

    def _deliver(self, name: str, items: list[dict[str, Any]], dropped: int) -> None:
        if name not in self.alerts.channels:  # ratui.yaml read again meanwhile (a console), without that channel
            self._suppress(name, items, "the channel is no longer in ratui.yaml")
            return
        if len(items) + dropped > self.alerts.digest_after:
            self._attempt(name, digest(items, dropped, self.project), items)
        else:
            for one in items:
                self._attempt(name, one, [one])

    def _attempt(self, name: str, message: dict[str, Any], covers: list[dict[str, Any]]) -> None:
        channel = self.alerts.channels[name]
        rules = ",".join(sorted({a.get("rule", "") for a in covers}))
        events = message["event"]
        pipelines = tuple(a["pipeline"] for a in covers)[:50]
        run_ids = tuple(a["run_id"] for a in covers)[:50]
        target = sending.target_of(channel, self.env)

        def record(outcome: str, detail: str, tries: int) -> None:
            self.state.record(Attempt(name, rules, events, pipelines, run_ids, outcome, detail, target, tries))

        sent_last_hour = self.state.sent_since(name, time.time() - 3600)
        if sent_last_hour >= channel.max_per_hour:
            record(SUPPRESSED, f"rate limit: {sent_last_hour} sent in the last hour (max_per_hour "
                               f"{channel.max_per_hour})", 0)
            return
        why, tries = "", 0
        for tries in range(1, channel.retries + 2):
            result = sending.send(channel, message, self.env)
            if result.ok:
                record(SENT, result.why, tries)
                return
            why = result.why
            if not result.retry or tries > channel.retries:
                break
            if self._hurry.wait(BACKOFF_SECONDS * 2 ** (tries - 1)) and self._past_deadline():
                break
        record(FAILED, why, tries)

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def flush(self, timeout: float = FLUSH_SECONDS) -> None:
        """Send what is pending now (no more gathering), waiting at most `timeout` seconds. Blocking."""
        if self._idle.is_set():
            return
        self._deadline = time.monotonic() + timeout
        self._hurry.set()
        self._wake.set()
        if not self._idle.wait(timeout):
            with self._lock:
                left, self._pending = self._pending, {}
            for name, items in left.items():
                self._suppress(name, items, f"ratui ended before it could send ({timeout:.0f} s)")
        self._hurry.clear()  # a process that goes on (a served command's flush) gathers again
        self._deadline = None

    def _suppress(self, name: str, items: list[dict[str, Any]], why: str) -> None:
        if items:
            self.state.record(Attempt(name, ",".join(sorted({a.get("rule", "") for a in items})), items[0]["event"],
                                      tuple(a["pipeline"] for a in items)[:50], tuple(a["run_id"] for a in items)[:50],
                                      SUPPRESSED, why, "", 0))


def send_test(alerts: Alerts, state: AlertState, name: str, project: str,
              env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`ratui alerts test CHANNEL`: one test alert, once (no rate limit, no retry), recorded like any other."""
    from ratui.engine.alerts.message import test_alert

    env = os.environ if env is None else env
    channel = alerts.channels[name]
    result = sending.send(channel, test_alert(name, project), env)
    target = sending.target_of(channel, env)
    outcome = SENT if result.ok else FAILED
    state.record(Attempt(name, "test", "test", (), (), outcome, result.why, target, 1))
    return {"channel": name, "outcome": outcome, "detail": result.why, "target": target}
