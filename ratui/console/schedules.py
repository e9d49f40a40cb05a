"""What the console shows of the project's schedules (the Schedules screen, 0): each schedule with its next fire (UTC
and its own time zone, as `ratui schedules` shows), its last fire and what it did, paused or not, and the runner's
lease (`ratui up`: who holds it, until when). Read by the controller in a worker (SQLite and a compile); the words
here are pure functions. Textual-free, Rich-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

UTC = timezone.utc
RECENT_FIRES = 50  # the fires the detail of a schedule lists (newest first)

# what a project with no schedule is told (the screen's empty state)
HOW_TO_DECLARE = (
    "No schedules in this project.",
    "",
    "Declare one in ratui.yaml, under `schedules:`:",
    "",
    "  schedules:",
    "    - name: nightly",
    '      select: "gold.daily_revenue+"      # `ratui run` selectors',
    '      cron: "0 6 * * *"                  # every day at 06:00',
    "      timezone: Europe/Amsterdam",
    "",
    "or on a pipeline of its own (`-- @schedule: 0 6 * * *; Europe/Amsterdam`, or `schedule:` in its config.yaml).",
    "`ratui up` is the runner that fires them. See docs/concepts/schedules.md (Schedules and the runner).",
)


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as the console shows it."""

    name: str
    select: str
    cron: str
    timezone: str
    catch_up: str
    atomic: bool
    enabled: bool
    paused: bool
    source: str
    next_utc: datetime | None  # None: disabled
    last_fire: dict[str, Any] | None  # its newest fire recorded (state/schedule_state.py schedule_fires), or None

    @property
    def state(self) -> str:
        """paused | disabled | enabled"""
        return "paused" if self.paused else ("enabled" if self.enabled else "disabled")


@dataclass(frozen=True)
class RunnerLease:
    """The runner's lease as it was read: which process on which host, until when (expired: nobody holds it)."""

    pid: int
    host: str
    acquired_at: str
    until: datetime
    expired: bool


@dataclass(frozen=True)
class Schedules:
    rows: list[ScheduleRow]
    lease: RunnerLease | None
    now: datetime


def read(engine: Any, compiled: Any, now: datetime) -> Schedules:
    """The project's schedules at `now` (their next fires after it, the lease judged by it). Blocking: SQLite."""
    rows = []
    for row in engine.schedule_rows(compiled, now):
        fires = engine.schedule_fires(row["name"], 1)
        upcoming = row.get("next_fire_utc")
        rows.append(ScheduleRow(
            row["name"], row["select"], row["cron"], row["timezone"], row["catch_up"], bool(row["atomic"]),
            bool(row["enabled"]), bool(row["paused"]), row["source"],
            datetime.fromisoformat(upcoming).astimezone(UTC) if upcoming else None, fires[0] if fires else None))
    held = engine.runner_lease()
    lease = None
    if held is not None:
        until = datetime.fromtimestamp(held.expires, UTC)
        lease = RunnerLease(held.pid, held.host, held.acquired_at, until, held.expired(now.timestamp()))
    return Schedules(rows, lease, now)


# ------------------------------------------------------------------------------------------------ words


def utc_text(at: datetime | str | None) -> str:
    """`2026-03-02 05:00` (UTC), `-` for none."""
    if at is None:
        return "-"
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def local_text(at: datetime | str | None, zone: str) -> str:
    """The same instant in the schedule's own time zone: `2026-03-02 06:00 CET`."""
    if at is None:
        return "-"
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")


def zone_text(at: datetime | None, zone: str) -> str:
    """The same instant in the schedule's own time zone, beside its UTC one: `06:00 CET`, with `+1d` / `-1d` when
    that is another day than in UTC (`00:30 CET +1d`)."""
    if at is None:
        return "-"
    utc, local = at.astimezone(UTC), at.astimezone(ZoneInfo(zone))
    days = (local.date() - utc.date()).days
    return local.strftime("%H:%M %Z") + (f" {days:+d}d" if days else "")


def definition_text(row: ScheduleRow) -> str:
    """The highlighted schedule, whole (the line under the table): what it runs, when, its catch-up."""
    where = "ratui.yaml" if row.source == "ratui.yaml" else f"pipeline {row.source}"
    return (f"{row.name}: runs {row.select} · cron {row.cron} in {row.timezone} · catch-up {row.catch_up}"
            + (" · atomic" if row.atomic else "") + f" · declared in {where}")


def why(fire: dict[str, Any]) -> str:
    """What a fire did, in a few words: `run`, `skipped: its previous run is still going`, `paused: not run`,
    `dropped: 3 missed fire(s) not run (catch_up none)`."""
    action, reason = fire.get("action") or "?", fire.get("reason") or ""
    if action == "run":
        return "run"
    if action == "paused":
        return "paused: not run"
    if action == "skipped":  # "<schedule's reason>: skipped, its previous run is still going"
        tail = reason.rsplit(": ", 1)[-1]
        return "skipped: " + (tail[len("skipped, "):] if tail.startswith("skipped, ") else tail)
    return f"{action}: {reason}" if reason else action


def lease_text(lease: RunnerLease | None) -> str:
    """The line above the table: who fires the schedules."""
    if lease is None:
        return "no runner holds the lease: nothing fires (start one with `ratui up`)"
    until = lease.until.strftime("%Y-%m-%d %H:%M:%S UTC")
    if lease.expired:
        return f"no runner holds the lease (`ratui up`): pid {lease.pid} on {lease.host}'s ran out at {until}"
    return f"runner: pid {lease.pid} on {lease.host} holds the lease until {until}"


FIRE_OF = re.compile(r"^fire of \d{4}-\d\d-\d\d \d\d:\d\d \S+(: )?")


def fire_reason(name: str, reason: str) -> str:
    """A fire's reason in the detail of its schedule, without what its row already says (the schedule's name and
    the fire's time): `on time`, `skipped, its previous run is still going`, `catching up 3 missed fire(s) ...`."""
    text = reason[len(f"schedule {name}: "):] if reason.startswith(f"schedule {name}: ") else reason
    return FIRE_OF.sub("", text).strip() or "on time"


def fire_rows(name: str, fires: list[dict[str, Any]], zone: str) -> list[tuple[str, str, str, str, str]]:
    """The detail's rows, newest first: fire time (UTC), in the schedule's zone, action, reason, invocation."""
    return [(utc_text(f.get("fire_at")), local_text(f.get("fire_at"), zone), f.get("action") or "?",
             fire_reason(name, f.get("reason") or ""), f.get("invocation") or "-") for f in fires]
