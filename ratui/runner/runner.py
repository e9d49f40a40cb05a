"""The runner's loop (`ratui up`): hold the project's lease, fire the schedules that are due, keep going.

Every loop: take or renew the lease (state/schedule_state.py; only one runner of a project holds it, the others
say who does and wait, and take over once it has expired), compile the project (a broken ratui.yaml is reported
and the last good compile kept), and for each schedule decide what is due (ops/schedule_fires.py), record it,
then start it through the Engine with trigger `schedule` and the schedule's name. A run that fails is recorded as
any run is; the runner goes on. A fire while the schedule's previous runs still go is skipped, recorded with why.
SIGTERM: no new fires; the runs in flight get `grace` seconds, then are cancelled; the lease is given up; exit 0.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from ratui.engine.errors import ProjectErrors, RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.ops.schedule_fires import due
from ratui.runner.clock import Clock

UTC = timezone.utc
Say = Callable[[str, dict[str, Any]], None]  # (kind, fields): a line of the runner's output


@dataclass
class Options:
    lease_seconds: float
    loop_seconds: float
    grace_seconds: float


@dataclass
class _Going:
    """A schedule's invocations: the one running, and fires recorded but not started yet (catch_up all)."""
    current: Any = None
    waiting: list[tuple[str, str]] = field(default_factory=list)  # (invocation id, reason)


class Runner:
    def __init__(self, engine: Engine, options: Options, say: Say, clock: Clock | None = None,
                 on_lease: Callable[[bool], None] | None = None):
        self.engine = engine
        self.on_lease = on_lease  # told when this runner starts (True) or stops (False) holding the lease
        self.options = options
        self.say = say
        self.clock = clock or Clock()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stopping = threading.Event()
        self.holding = False
        self.last_loop: datetime | None = None
        self.lease: Any = None
        self._compiled: Any = None
        self._going: dict[str, _Going] = {}
        self._waiting_for: tuple[int, str] | None = None
        self._stale: dict[str, str] = {}  # pipeline -> its freshness state at the last loop

    # ------------------------------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        lease = self.lease
        return {"alive": True, "pid": os.getpid(), "host": socket.gethostname(),
                "last_loop": self.last_loop.isoformat() if self.last_loop else None,
                "holding_lease": self.holding, "stopping": self.stopping.is_set(),
                "lease": lease.to_dict() if lease is not None else None,
                "in_flight": sorted(name for name, going in list(self._going.items()) if _active(going.current))}

    # ------------------------------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Loop until stop() (SIGTERM); then let the runs in flight finish within the grace, and give up the lease."""
        try:
            while not self.stopping.is_set():
                wait = self.loop_once()
                self.stopping.wait(wait)
        finally:
            self._wind_down()

    def stop(self) -> None:
        self.stopping.set()

    def loop_once(self) -> float:
        """One loop; returns the real seconds to sleep before the next."""
        held, lease = self.engine.take_runner_lease(self.holder, self.options.lease_seconds)
        self.lease = lease
        self.last_loop = datetime.now(UTC)
        if not held:
            return self._wait_for(lease)
        if not self.holding:
            self.holding = True
            self._waiting_for = None
            self.say("lease", {"message": f"holding the lease (pid {os.getpid()} on {socket.gethostname()}, "
                                          f"{self.options.lease_seconds:g} s, renewed every loop)"})
            self._tell_lease(True)
        compiled = self._compile()
        if compiled is None:
            return self.options.loop_seconds
        self._freshness(compiled)
        self.engine.alert_runs_going()  # `on: stuck` rules: a run going longer than they allow
        now = self.clock.now()
        states = self.engine.schedule_states()
        soonest = self.options.loop_seconds
        for schedule in compiled.schedules:
            if self.stopping.is_set():
                break
            try:
                upcoming = self._tick(compiled, schedule, states.get(schedule.name), now)
            except RatuiError as exc:  # a fire that cannot start: said, and the runner goes on
                self.say("error", {"schedule": schedule.name, "code": exc.code, "message": exc.message})
                continue
            if upcoming is not None:
                soonest = min(soonest, self.clock.wall_seconds_until(upcoming))
        return max(0.05, min(soonest, self.options.lease_seconds / 3))

    def _freshness(self, compiled: Any) -> None:
        """The tables' freshness, handed to the `on: freshness` alert rules (the lease holder's job: one runner
        alerts); a table that goes stale, or from a warning to an error, is said once."""
        if not any(rule.on == "freshness" for rule in compiled.settings.alerts.rules):
            return
        try:
            rows = self.engine.alert_freshness(compiled)
        except RatuiError as exc:
            self.say("error", {"code": exc.code, "message": exc.message})
            return
        states = {row["pipeline"]: row["state"] for row in rows}
        for key, state in states.items():
            if self._stale.get(key, "fresh") != state and state != "fresh":
                self.say("stale", {"message": f"{key} is stale ({state})", "pipeline": key, "state": state})
        self._stale = states

    def _wait_for(self, lease: Any) -> float:
        if self.holding:  # ours expired and someone else took it: stop firing
            self.holding = False
            self.say("lease", {"message": "lost the lease; waiting"})
            self._tell_lease(False)
        key = (lease.pid, lease.host)
        if self._waiting_for != key:
            self._waiting_for = key
            self.say("waiting", {"message": f"the lease is held by pid {lease.pid} on host {lease.host} (expires in "
                                            f"{max(0.0, lease.expires - time.time()):.0f} s); waiting to take over",
                                 "holder_pid": lease.pid, "holder_host": lease.host})
        return max(0.05, min(self.options.loop_seconds, lease.expires - time.time() + 0.05))

    def compiled(self) -> Any:
        """The project as the last loop compiled it (None before the first good compile)."""
        return self._compiled

    def _compile(self):
        try:
            self._compiled = self.engine.compile()
        except (RatuiError, ProjectErrors) as exc:
            errors = exc.errors if isinstance(exc, ProjectErrors) else [exc]
            for error in errors:
                self.say("error", {"code": error.code, "message": error.message, "file": error.file,
                                   "line": error.line})
        return self._compiled

    # ------------------------------------------------------------------------------------------ one schedule

    def _tick(self, compiled: Any, schedule: Any, state: dict[str, Any] | None, now: datetime) -> datetime | None:
        """Decide, record and start what `schedule` has due; returns its next fire."""
        going = self._going.setdefault(schedule.name, _Going())
        self._start_waiting(compiled, schedule, going)
        if not schedule.enabled:
            return None
        last_text = (state or {}).get("last_fire")
        if last_text is None:
            self.engine.schedule_baseline(schedule.name, now)
            self.say("schedule", {"schedule": schedule.name, "message": "first seen: fires from now on"})
            return due(schedule.name, schedule.cron, schedule.timezone, schedule.catch_up, now, now).next_at
        plan = due(schedule.name, schedule.cron, schedule.timezone, schedule.catch_up,
                   datetime.fromisoformat(last_text), now)
        if plan.latest is None:
            return plan.next_at
        rows: list[tuple[datetime, str, str, str | None]] = []
        if plan.dropped:
            rows.append((plan.latest, "dropped", f"{plan.dropped} missed fire(s) not run (catch_up none)", None))
        if (state or {}).get("paused"):
            rows += [(f.at, "paused", f"{f.reason}: not run, the schedule is paused", None) for f in plan.fires]
        elif _active(going.current) or going.waiting or self._other_active(state):
            rows += [(f.at, "skipped", f"{f.reason}: skipped, its previous run is still going", None)
                     for f in plan.fires]
        else:
            rows += [(f.at, "run", f.reason, self.engine.new_invocation_id()) for f in plan.fires]
        if not self.engine.record_schedule_fires(self.holder, schedule.name, last_text, plan.latest, rows):
            return plan.next_at  # the lease went elsewhere, or another runner recorded them: nothing here
        for at, action, reason, invocation in rows:
            self.say("fire", {"schedule": schedule.name, "fire_at": at.isoformat(), "action": action,
                              "reason": reason, "invocation": invocation})
            if invocation is not None:
                going.waiting.append((invocation, reason))
        self.engine.alert_missed(schedule.name, [(at.isoformat(), action, reason) for at, action, reason, _ in rows
                                                 if action in ("dropped", "skipped") or "missed fire" in reason])
        self._start_waiting(compiled, schedule, going)
        return plan.next_at

    def _other_active(self, state: dict[str, Any] | None) -> bool:
        """The last invocation recorded for the schedule still has runs going (a runner before this one)."""
        invocation = (state or {}).get("last_invocation")
        return bool(invocation) and self.engine.invocation_active(invocation) and all(
            getattr(g.current, "id", None) != invocation for g in self._going.values())

    def _start_waiting(self, compiled: Any, schedule: Any, going: _Going) -> None:
        if _active(going.current) or not going.waiting or self.stopping.is_set():
            return
        invocation, reason = going.waiting.pop(0)
        keys = compiled.select(schedule.selectors)
        try:
            going.current = self.engine.start(keys, trigger="schedule", schedule=schedule.name,
                                              invocation_id=invocation, atomic=schedule.atomic, compiled=compiled,
                                              on_done=lambda inv: self._ended(schedule.name, inv))
        except RatuiError as exc:
            self.say("error", {"schedule": schedule.name, "invocation": invocation, "code": exc.code,
                               "message": exc.message})
            return
        self.say("started", {"schedule": schedule.name, "invocation": invocation, "pipelines": keys,
                             "run_ids": list(going.current.run_ids)})

    def _ended(self, name: str, invocation: Any) -> None:
        statuses = [r.status for r in invocation.results]
        ok = sum(1 for s in statuses if s == "success")
        self.say("finished", {"schedule": name, "invocation": invocation.id, "succeeded": ok,
                              "not_succeeded": len(statuses) - ok,
                              "error": str(invocation.error) if invocation.error else None})

    def _tell_lease(self, held: bool) -> None:
        if self.on_lease is not None:
            try:
                self.on_lease(held)
            except Exception as exc:  # what the caller does with the lease never stops the loop
                self.say("error", {"message": f"{type(exc).__name__}: {exc}"})

    # ------------------------------------------------------------------------------------------ stopping

    def _wind_down(self) -> None:
        going = [g.current for g in self._going.values() if _active(g.current)]
        if going:
            self.say("stopping", {"message": f"{len(going)} invocation(s) in flight: up to "
                                             f"{self.options.grace_seconds:g} s to finish, then cancelled"})
            deadline = time.monotonic() + self.options.grace_seconds
            for invocation in going:
                invocation.wait(max(0.0, deadline - time.monotonic()))
            for invocation in going:
                if not invocation.done:
                    invocation.cancel()
            for invocation in going:
                invocation.wait(30)
        if self.holding:
            self._tell_lease(False)
            self.engine.release_runner_lease(self.holder)
            self.holding = False
        self.say("stopped", {"message": "stopped"})


def _active(invocation: Any) -> bool:
    return invocation is not None and not invocation.done
