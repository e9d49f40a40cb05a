"""The words every part of ratui shares: run statuses, phases, the main ref, triggers, time and size formatting.

Defined once, here. Light on purpose (standard library only): the console imports it before its first paint,
and the CLI's quick commands import it without loading Spark, PyIceberg or SQLAlchemy.
"""

from __future__ import annotations

from datetime import datetime, timezone

# --------------------------------------------------------------------------------------------------- refs

MAIN = "main"  # the production ref; runs branch from it and merge into it

# ------------------------------------------------------------------------------------------------ project

LAYERS = ("bronze", "silver", "gold")  # {namespace}/pipelines/{layer}/{name}/

# --------------------------------------------------------------------------------------------------- runs

RUN_PREFIX, PUBLISH_PREFIX = "run-", "publish-"  # the branches ratui keeps for a run, an atomic publish


def run_branch(run_id: str) -> str:
    """The branch a run writes on."""
    return f"{RUN_PREFIX}{run_id}"


RUN_STATUSES = ("pending", "running", "success", "failed", "cancelled", "skipped")
ACTIVE = ("pending", "running")  # a run not finished yet
FINAL = ("success", "failed", "cancelled", "skipped")  # a run that ended, one way or another
OUTCOMES = ("success", "warned", "failed", "cancelled", "skipped")  # what a person is told: warned = success + warnings

RUN_TYPES = ("skip", "rebuild", "incremental", "full")  # change detection's decision (run/changes.py)
TRIGGERS = ("cli", "console", "watch", "reaper", "api", "backfill")  # api: the Python API (ratui.open)

PHASES = ("branch", "config", "build", "write", "quality", "resolve")
PHASE_TITLES = {
    "branch": "0 branch",
    "config": "1 config",
    "build": "2 build",
    "write": "3 write",
    "quality": "4 quality",
    "resolve": "5 resolve",
}
PHASE_STATES = ("waiting", "running", "done", "failed", "cancelled", "skipped")


# a quality test's result: not_run = Spark could not run it (gone, a class missing there): no finding about the data
QUALITY_STATUSES = ("passed", "failed", "warned", "error", "not_run")
QUALITY_NOT_RUN = "not_run"
# why a test did not run, in a few words, by the code of the error that stopped it (its family when no code matches)
NOT_RUN_REASONS = {"RAT-SPK-001": "Spark unreachable", "RAT-SPK-004": "a class missing on Spark's side",
                   "RAT-S3": "Spark could not reach the object store"}


def not_run_reason(error: str | None) -> str:
    """'Spark unreachable' for a test whose error is 'RAT-SPK-001 Spark Connect server unreachable ...'."""
    code = (error or "").split(" ", 1)[0]
    return NOT_RUN_REASONS.get(code) or NOT_RUN_REASONS.get(code.rsplit("-", 1)[0]) or "Spark could not run it"


def outcome(status: str | None, warnings: int | None = 0) -> str | None:
    """The status a person reads: a success with quality warnings is 'warned'."""
    return "warned" if status == "success" and warnings else status


# --------------------------------------------------------------------------------------------------- time


def now_iso() -> str:
    """Now, UTC, as stored everywhere: '2026-03-01T09:00:00.123Z'."""
    return iso(datetime.now(timezone.utc))


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str | None) -> datetime | None:
    """ISO-8601 with 'Z' or an offset (naive means UTC) -> aware datetime; None when absent or unreadable."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def format_duration(ms: int | float | None) -> str:
    """1234 -> '1.23s'; 15_000 -> '15.0s'; 75_000 -> '1m15s'; 4_000_000 -> '1h06m'; None -> '-'."""
    if ms is None:
        return "-"
    ms = int(ms)
    if ms < 10_000:
        return f"{ms / 1000:.2f}s"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    minutes, rest = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


# --------------------------------------------------------------------------------------------------- sizes


def format_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


# The reaper's tasks, in the order a pass runs them, as people read them (ops/reaper.py has what each one does)
# what left an unreachable file the orphan sweep found (ops/orphans.py: classify), in the order they are listed
ORPHAN_KIND_TITLES = {"dropped_table": "dropped table", "deleted_branch": "deleted branch", "orphan": "orphan"}


def orphan_group(item: dict) -> str:
    """The group an orphan-file item of a reaper report is listed under: "dropped table demo.bronze.old",
    "deleted branch feature" or "orphan" (reports of before the kinds: "orphan" too)."""
    kind = item.get("kind") or "orphan"
    what = item.get("table") if kind == "dropped_table" else item.get("ref") if kind == "deleted_branch" else None
    return f"{ORPHAN_KIND_TITLES.get(kind, kind)} {what}" if what else ORPHAN_KIND_TITLES.get(kind, kind)


def orphan_groups(items: list[dict]) -> list[tuple[str, list[dict], int]]:
    """Orphan-file items by group (orphan_group), in the order they come (the reaper lists them grouped):
    (group, its items, their bytes)."""
    out: dict[str, list[dict]] = {}
    for item in items:
        out.setdefault(orphan_group(item), []).append(item)
    return [(group, found, sum(int(i.get("bytes") or 0) for i in found)) for group, found in out.items()]


REAPER_TASK_TITLES = {
    "stuck_runs": "stuck runs",
    "orphan_branches": "orphan branches",
    "run_history": "run history",
    "processed_files": "processed landing files",
    "compaction": "files with deleted rows",
    "snapshots": "snapshots on main",
    "orphan_files": "orphan files",
}
