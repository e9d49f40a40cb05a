"""Time intervals of `incremental_by_time` pipelines: their boundaries, the set a table has done, and what is due.

An interval is half-open, [start, end), in UTC, one `batch` long (hour, day or month; a month is a calendar month).
Times here are naive datetimes meaning UTC; the template gets them as ISO text without a zone
(`2026-03-01T00:00:00`), which Spark reads as a TIMESTAMP in the session's zone (ratui's sessions run in UTC).

Which intervals a table has done travels with the table, in the summary of each snapshot an interval run writes:

    ratui.intervals = {"batch": "day", "done": [["2026-01-01T00:00:00", "2026-02-01T00:00:00"], ...]}

`done` is the whole set after that write, as sorted, merged ranges (a year of daily runs with no gap is one
range), so the set is read from the newest snapshot of the table's ancestry that carries it (`done_of`): a branch
carries it, a merge hands it on, a rollback takes it back, like the landing facts (state/landing_facts.py).

Plans never hold one object per interval: a range is counted by arithmetic (`count`) and walked lazily (`walk`).
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from typing import Any, Iterable, Iterator

from ratui.engine.errors import RatuiError

BATCHES = ("hour", "day", "month")
PROPERTY = "ratui.intervals"

Range = tuple[datetime, datetime]


# --------------------------------------------------------------------------------------------- boundaries


def parse_time(text: Any, code: str = "RAT-BKF-001", what: str = "time") -> datetime:
    """An ISO date or timestamp (a date is its midnight; a zone is converted to UTC, then dropped)."""
    if isinstance(text, datetime):
        value = text
    elif isinstance(text, date):
        value = datetime(text.year, text.month, text.day)
    else:
        raw = str(text).strip()
        try:
            value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise RatuiError(code, f"{what} '{raw}' is not an ISO date or timestamp") from None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S")


def floor(value: datetime, batch: str) -> datetime:
    """The start of the interval holding `value`."""
    if batch == "hour":
        return value.replace(minute=0, second=0, microsecond=0)
    if batch == "day":
        return value.replace(hour=0, minute=0, second=0, microsecond=0)
    return value.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def ceil(value: datetime, batch: str) -> datetime:
    start = floor(value, batch)
    return start if start == value else step(start, batch)


def step(value: datetime, batch: str, n: int = 1) -> datetime:
    """`value` (an interval's start) moved by n intervals (n may be negative)."""
    if batch == "hour":
        return value + timedelta(hours=n)
    if batch == "day":
        return value + timedelta(days=n)
    months = value.year * 12 + value.month - 1 + n
    return value.replace(year=months // 12, month=months % 12 + 1)


def count(start: datetime, end: datetime, batch: str) -> int:
    """How many intervals [start, end) holds (both boundaries on the batch's grid)."""
    if end <= start:
        return 0
    if batch == "month":
        return (end.year * 12 + end.month) - (start.year * 12 + start.month)
    seconds = 3600 if batch == "hour" else 86400
    return int((end - start).total_seconds()) // seconds


def walk(ranges: Iterable[Range], batch: str) -> Iterator[Range]:
    """Every interval of `ranges`, in order, one at a time."""
    for start, end in ranges:
        current = start
        while current < end:
            following = step(current, batch)
            yield current, following
            current = following


# --------------------------------------------------------------------------------------------- range sets


def merged(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, with touching and overlapping ranges joined."""
    out: list[list[datetime]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def minus(whole: Range, done: list[Range]) -> list[Range]:
    """The parts of `whole` not in `done` (sorted, merged ranges)."""
    start, end = whole
    out: list[Range] = []
    cursor = start
    for a, b in done:
        if b <= cursor or a >= end:
            continue
        if a > cursor:
            out.append((cursor, min(a, end)))
        cursor = max(cursor, b)
        if cursor >= end:
            break
    if cursor < end:
        out.append((cursor, end))
    return out


def overlaps(interval: Range, ranges: Iterable[Range]) -> bool:
    return any(a < interval[1] and interval[0] < b for a, b in ranges)


# --------------------------------------------------------------------------------------------- the table's record


def summary(batch: str, done: list[Range]) -> dict[str, str]:
    """The snapshot-summary property recording `done`."""
    return {PROPERTY: json.dumps({"batch": batch, "done": [[iso(a), iso(b)] for a, b in merged(done)]},
                                 separators=(",", ":"))}


def _read(props: dict[str, str]) -> list[Range] | None:
    text = props.get(PROPERTY)
    if not text:
        return None
    try:
        data = json.loads(text)
        return merged((parse_time(a), parse_time(b)) for a, b in data.get("done", []))
    except (ValueError, TypeError, AttributeError, RatuiError):
        return None


def done_of(table: Any) -> list[Range]:
    """The intervals `table` has done: the record of the newest snapshot of its ancestry that carries one (none
    for a table no interval run wrote)."""
    if table is None:
        return []
    metadata = table.metadata
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    current = metadata.current_snapshot_id
    while current is not None and current in by_id:
        snapshot = by_id[current]
        props = dict(getattr(getattr(snapshot, "summary", None), "additional_properties", None) or {})
        found = _read(props)
        if found is not None:
            return found
        current = snapshot.parent_snapshot_id
    return []


# --------------------------------------------------------------------------------------------- what is due


def first_start(config: Any) -> datetime | None:
    return parse_time(config.start) if getattr(config, "start", None) else None


def due(config: Any, done: list[Range], now: datetime) -> Range | None:
    """The range a plain run fills: from `lookback` intervals before the first missing one (after the last done
    interval, else from `start`, else the last complete interval) up to the last complete interval before `now`;
    None when nothing is due."""
    batch = config.batch
    upto = floor(now, batch)
    if done:
        begin = done[-1][1]
    elif (first := first_start(config)) is not None:
        begin = floor(first, batch)
    else:
        begin = step(upto, batch, -1)
    if begin >= upto:
        return None
    if done and config.lookback:
        begin = step(begin, batch, -int(config.lookback))
        floor_at = first_start(config)
        if floor_at is not None:
            begin = max(begin, floor(floor_at, batch))
    return begin, upto


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)
