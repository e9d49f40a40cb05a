"""Formatting for the console: durations, counts, ages, sparklines and status glyphs. Pure functions."""

from __future__ import annotations

from datetime import datetime

from ratui.engine.vocabulary import format_duration as fmt_ms  # noqa: F401 - the console's name for it
from ratui.engine.vocabulary import MAIN, parse_time

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"

# status -> (glyph, style). One vocabulary across every screen.
STATUS = {
    "success": ("✔", "green"),
    "warned": ("▲", "yellow"),
    "failed": ("✘", "red"),
    "error": ("✘", "red"),
    "cancelled": ("■", "yellow"),
    "skipped": ("↷", "dim"),
    "running": ("●", "cyan"),
    "pending": ("○", "cyan"),
    "passed": ("✔", "green"),
    "not_run": ("○", "yellow"),  # a quality test Spark could not run: no finding about the data
    "never": ("·", "dim"),
}

PHASE_STATE = {
    "waiting": ("·", "dim"),
    "running": ("●", "cyan"),
    "done": ("✔", "green"),
    "failed": ("✘", "red"),
    "cancelled": ("■", "yellow"),
    "skipped": ("↷", "dim"),
}

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def outcome(status: str | None, warnings: int = 0, reason: str | None = None, error: object = None) -> str:
    """What a run came to, in the console's words: success | warned | unchanged | upstream | failed | cancelled
    (or its status while it is not over). A skip because nothing changed is not a skip because an upstream
    failed, and neither is a failure; a run with quality warnings succeeded."""
    if status == "success" and warnings:
        return "warned"
    if status == "skipped":
        return "upstream" if error or (reason or "").startswith("upstream failed") else "unchanged"
    return status or "never"


OUTCOME_WORDS = {"success": "succeeded", "warned": "succeeded with quality warnings",
                 "unchanged": "unchanged (skipped)", "upstream": "skipped (upstream failed)", "failed": "failed",
                 "cancelled": "cancelled"}


def batch_summary(results: list, planned: int, cancelled: bool = False) -> tuple[str, bool]:
    """"7 of 10 succeeded, 3 unchanged (skipped)": each outcome counted apart; True when none failed, was cancelled
    or was skipped for a failure."""
    counts: dict[str, int] = {}
    for r in results:
        key = outcome(r.status, r.warnings, r.reason, r.error)
        counts[key] = counts.get(key, 0) + 1
    ok = counts.get("success", 0) + counts.get("warned", 0)
    parts = [f"{ok} of {planned} succeeded" + (f" ({counts['warned']} with quality warnings)"
                                                  if counts.get("warned") else "")]
    for key in ("unchanged", "failed", "upstream", "cancelled"):
        if counts.get(key):
            parts.append(f"{counts[key]} {OUTCOME_WORDS[key]}")
    not_run = planned - len(results)
    if not_run:
        parts.append(f"{not_run} not started" + (" (cancelled)" if cancelled else ""))
    clean = not (counts.get("failed") or counts.get("upstream") or counts.get("cancelled") or not_run)
    return ", ".join(parts) + ".", clean


def quality_word(status: str | None) -> str:
    """A quality result as a person reads it: 'not run' for not_run."""
    return (status or "").replace("_", " ")


def glyph(status: str | None) -> tuple[str, str]:
    return STATUS.get(status or "never", ("?", ""))


def fmt_count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def fmt_time(text: str | None) -> str:
    """An ISO timestamp as 'YYYY-MM-DD HH:MM:SS' (UTC, as stored)."""
    value = parse_time(text)
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def fmt_age(text: str | None, now: datetime) -> str:
    """How long ago: '45s', '12m', '3h', '5d'."""
    value = parse_time(text)
    if value is None:
        return "-"
    seconds = max(0, int((now - value).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def sparkline(values: list[float | int | None], width: int = 8) -> str:
    """Oldest to newest, left to right, scaled to the largest value; blank for no data."""
    data = [v for v in values if v is not None][-width:]
    if not data:
        return ""
    top = max(data) or 1
    return "".join(SPARK_BLOCKS[min(len(SPARK_BLOCKS) - 1, int(v / top * (len(SPARK_BLOCKS) - 1) + 0.5))]
                   for v in data)


def bar(fraction: float, width: int) -> str:
    """A horizontal bar with eighth-block resolution."""
    fraction = max(0.0, min(1.0, fraction))
    eighths = int(round(fraction * width * 8))
    full, rest = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[rest] if rest else ""
    text = "█" * full + partial
    if not text and fraction > 0:
        text = "▏"
    return text


def short_key(key: str, namespace: str | None = None) -> str:
    """'ecommerce.silver.clean_orders' -> 'silver.clean_orders' in its own namespace."""
    if namespace and key.startswith(namespace + "."):
        return key[len(namespace) + 1:]
    return key


def spark_progress(progress) -> str:
    """A running phase's Spark jobs in a few words: `37/200 tasks · stage 1/2` (SparkProgress)."""
    if progress is None or not progress.tasks_total:
        return "Spark job starting…" if progress is not None else ""
    text = f"{progress.tasks_done:,}/{progress.tasks_total:,} tasks"
    if progress.stages_total > 1:
        text += f" · stage {min(progress.stages_done + 1, progress.stages_total)}/{progress.stages_total}"
    return text


def on_ref(text: str, ref: str | None) -> str:
    """A recorded message or hint ("... main is unchanged") told for the ref its run merges into: a run on dev
    leaves dev unchanged (main it never touched)."""
    if not text or not ref or ref == MAIN:
        return text
    return text.replace("main is unchanged", f"{ref} is unchanged").replace("main unchanged", f"{ref} unchanged")
