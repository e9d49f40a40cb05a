"""When a schedule fires: pure functions of a schedule, the last fire recorded and now (no clock here).

Fire times come from croniter in the schedule's time zone (zoneinfo), returned as UTC instants. Across DST:
- a local time that does not exist (the spring-forward gap, 02:30 in Europe/Amsterdam on the last Sunday of
  March) fires at the next valid instant (03:00 local), once;
- a local time that happens twice (the autumn repeated hour) fires once, at its first occurrence (the second
  one, `fold=1`, is left out).

What is due after downtime (`catch_up`), given the fires between the last one recorded and now:
- `none`: none of the missed fires run; only a fire that is on time (at most `late_after` late) does;
- `last` (default): one run stands for every fire due, its reason says how many were missed;
- `all`: one run per fire due, oldest first (at most MAX_FIRES at once; the rest on the next loop).
A schedule never fired before (no last fire) has nothing due: it starts from now, it does not catch up on its
whole past.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

UTC = timezone.utc
MAX_FIRES = 1000  # fires looked at per decision: catch_up all runs at most this many at once
ON_TIME = timedelta(seconds=90)  # a fire found at most this late is on time, not missed


@dataclass(frozen=True)
class Fire:
    at: datetime  # the scheduled instant (UTC) this run stands for
    reason: str
    missed: int = 0  # the earlier fires this run stands for too (catch_up last)


@dataclass(frozen=True)
class Due:
    fires: list[Fire] = field(default_factory=list)  # what to run now, oldest first
    dropped: int = 0  # fires due that will not run (catch_up none)
    latest: datetime | None = None  # the newest fire due (the one to record as the last fire), None: none due
    next_at: datetime | None = None  # the next fire after now (UTC)


def _is_repeat(local: datetime) -> bool:
    """The second occurrence of a wall-clock time in the autumn repeated hour."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def fires_after(cron: str, zone: str, after: datetime, limit: int = MAX_FIRES, until: datetime | None = None):
    """The fire instants (UTC) strictly after `after` and at most `until`, oldest first, at most `limit`."""
    from croniter import croniter

    tz = ZoneInfo(zone)
    it = croniter(cron, after.astimezone(tz))
    out: list[datetime] = []
    last: datetime | None = None
    while len(out) < limit:
        local = it.get_next(datetime)
        if _is_repeat(local):
            continue
        at = local.astimezone(UTC)
        if until is not None and at > until:
            break
        if at <= after or at == last:  # a gap's instants may all land on its end: once
            continue
        out.append(at)
        last = at
    return out


def next_fire(cron: str, zone: str, after: datetime) -> datetime:
    return fires_after(cron, zone, after, limit=1)[0]


def due(name: str, cron: str, zone: str, catch_up: str, last: datetime | None, now: datetime,
        on_time: timedelta = ON_TIME) -> Due:
    """What the schedule `name` should run at `now`, its last fire recorded being `last` (None: never)."""
    upcoming = next_fire(cron, zone, now)
    if last is None:
        return Due(next_at=upcoming)
    fires = fires_after(cron, zone, last, until=now, limit=MAX_FIRES + 1)
    if not fires:
        return Due(next_at=upcoming)
    capped = fires[:MAX_FIRES]
    newest = fires[-1]
    tz = ZoneInfo(zone)

    def local(at: datetime) -> str:
        return at.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")

    on_time_fire = now - newest <= on_time
    if catch_up == "none":
        run = [Fire(newest, f"schedule {name}: fire of {local(newest)}")] if on_time_fire else []
        return Due(run, len(fires) - len(run), newest, upcoming)
    if catch_up == "all":
        return Due([Fire(at, f"schedule {name}: fire of {local(at)}" + ("" if now - at <= on_time else
                                                                         " (missed, caught up)"))
                    for at in capped], 0, capped[-1], upcoming)
    missed = len(fires) - (1 if on_time_fire else 0)
    if missed == 0:
        reason = f"schedule {name}: fire of {local(newest)}"
    else:
        more = "+" if len(fires) > MAX_FIRES else ""
        reason = (f"schedule {name}: catching up {missed}{more} missed fire(s) in one run "
                  f"({local(fires[0])} to {local(newest)})")
    return Due([Fire(newest, reason, missed=max(0, len(fires) - 1))], 0, newest, upcoming)
