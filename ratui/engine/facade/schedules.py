"""The Engine's schedules: the project's schedules with their next and last fires, pause and resume, what is due, the
fires recorded before they run, and the runner's lease (`ratui up`, runner/; schedules.md).

    rows = engine.schedule_rows()                        # ratui schedules: name, cron, next fire, paused, lease
    engine.pause_schedule("nightly")                     # persisted in the state database
    held, lease = engine.take_runner_lease(holder, 60)   # the runner, every loop
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ratui.engine.facade.base import EngineBase
from ratui.engine.project.compiler import CompiledProject

UTC = timezone.utc


class SchedulesPart(EngineBase):
    def _schedule_state(self):
        from ratui.engine.state.schedule_state import ScheduleState

        with self._lock:
            state = getattr(self, "_schedules_db", None)
            if state is None:
                state = self._schedules_db = ScheduleState(self.settings.db_path)
            return state

    def schedule_rows(self, compiled: CompiledProject | None = None, now: datetime | None = None
                      ) -> list[dict[str, Any]]:
        """Every valid schedule with its next fire (UTC and its own time zone), last fire, paused and the runner's
        lease holder."""
        from zoneinfo import ZoneInfo

        from ratui.engine.ops.schedule_fires import next_fire

        compiled = compiled or self.compile()
        now = now or datetime.now(UTC)
        states = self._schedule_state().states()
        lease = self.runner_lease()
        holder = None if lease is None or lease.expired(now.timestamp()) else lease.to_dict()
        rows = []
        for schedule in compiled.schedules:
            state = states.get(schedule.name, {})
            upcoming = next_fire(schedule.cron, schedule.timezone, now) if schedule.enabled else None
            rows.append({
                "name": schedule.name, "select": schedule.select, "cron": schedule.cron,
                "timezone": schedule.timezone, "catch_up": schedule.catch_up, "atomic": schedule.atomic,
                "enabled": schedule.enabled, "source": schedule.source,
                "next_fire_utc": upcoming.isoformat() if upcoming else None,
                "next_fire_local": upcoming.astimezone(ZoneInfo(schedule.timezone)).isoformat() if upcoming else None,
                "last_fire": state.get("last_fire"), "last_invocation": state.get("last_invocation"),
                "paused": bool(state.get("paused")), "lease_holder": holder,
            })
        return rows

    def pause_schedule(self, name: str, paused: bool = True, compiled: CompiledProject | None = None) -> None:
        """Pause (or resume) the schedule `name` (RAT-SCH-005 when there is none): persisted, every runner reads it
        before it fires."""
        (compiled or self.compile()).schedule(name)
        self._schedule_state().set_paused(name, paused)

    def schedule_states(self) -> dict[str, dict[str, Any]]:
        """Per schedule name: paused, last_fire, last_invocation."""
        return self._schedule_state().states()

    def schedule_fires(self, schedule: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return self._schedule_state().fires(schedule, limit)

    def schedule_baseline(self, name: str, at: datetime) -> None:
        self._schedule_state().baseline(name, at.astimezone(UTC).isoformat())

    def record_schedule_fires(self, holder: str, name: str, expected_last: str | None, new_last: datetime,
                              fires: list[tuple[datetime, str, str, str | None]]) -> bool:
        """Record fires (at, action, reason, invocation) of `name` before acting on them, while `holder` holds the
        lease and the last fire is still `expected_last`; whether they were recorded (state/schedule_state.py)."""
        from ratui.engine.state.schedule_state import FireRow

        rows = [FireRow(name, at.astimezone(UTC).isoformat(), action, reason, invocation)
                for at, action, reason, invocation in fires]
        return self._schedule_state().record_fires(holder, name, expected_last, new_last.astimezone(UTC).isoformat(),
                                                   rows)

    def runner_lease(self):
        """The runner's lease (state/schedule_state.py Lease) or None."""
        return self._schedule_state().lease()

    def take_runner_lease(self, holder: str, seconds: float):
        return self._schedule_state().take_lease(holder, seconds)

    def release_runner_lease(self, holder: str) -> None:
        self._schedule_state().release_lease(holder)

    @staticmethod
    def new_invocation_id() -> str:
        """An id for an invocation recorded before it starts (a fire is recorded, then run)."""
        from ratui.engine.run.invocation import new_invocation_id

        return new_invocation_id()

    def invocation_active(self, invocation: str) -> bool:
        """Whether a run of that invocation is still pending or running (any process)."""
        return any(run.get("invocation") == invocation for run in self._state.history.unfinished_runs())
