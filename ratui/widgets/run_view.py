"""Widgets of the run detail screen: the phase table with its profile bars, the run's quality summary and its data
diff."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ratui.console.diffs import column_rows, counts_text, exact, method_text, sample_text
from ratui.console.format import PHASE_STATE, SPINNER, bar, fmt_ms, glyph, quality_word, spark_progress
from ratui.console.live import LiveRun
from ratui.engine.vocabulary import PHASE_TITLES

BAR_WIDTH = 24
TASK_BAR_WIDTH = 12  # a running phase's Spark tasks: the bar and "1,234/5,000 tasks" fit the profile column
QUALITY_ORDER = {"failed": 0, "error": 0, "not_run": 1, "warned": 1, "passed": 2}


def phase_table(run: LiveRun, now: float, frame: int = 0) -> Table:
    """One row per phase: indicator, state, duration (live while running) and the phase profile bar."""
    table = Table(box=None, expand=False, padding=(0, 1), show_edge=False, header_style="bold dim")
    table.add_column("phase", min_width=10)
    table.add_column("state", min_width=12)
    table.add_column("time", justify="right", min_width=8)
    table.add_column("profile", min_width=BAR_WIDTH + 6)
    def spent(phase) -> int:
        if phase.state == "running":
            return phase.prior_ms + (int((now - phase.started) * 1000) if phase.started is not None else 0)
        return phase.duration_ms or 0

    total = sum(spent(p) for p in run.phases.values()) or 1  # shares of the time so far
    for phase in run.phases.values():
        icon, style = PHASE_STATE.get(phase.state, ("?", ""))
        state_text = f"{icon} {phase.state}"
        if phase.state == "running":
            icon = SPINNER[frame % len(SPINNER)]
            state_text = f"{icon} {phase.state}"
            elapsed = spent(phase)
            time_text = Text(fmt_ms(elapsed), style="cyan")
            profile = Text(bar(elapsed / total, BAR_WIDTH), style="cyan dim")
            if run.staging is not None:
                zone, done, of = run.staging
                profile = Text(f"fetching {zone}: {done}/{of} objects", style="cyan")
            elif run.spark is not None:  # Spark's own progress of the phase's running job: tasks, stage
                done = bar(run.spark.fraction or 0.0, TASK_BAR_WIDTH)
                profile = Text(done, style="cyan")
                profile.append("░" * (TASK_BAR_WIDTH - len(done)), style="dim")
                tasks, _, stage = spark_progress(run.spark).partition(" · ")
                profile.append(f" {tasks}", style="cyan")
                if stage:
                    state_text = f"{icon} {stage}"
        elif phase.duration_ms is not None:
            share = phase.duration_ms / total
            time_text = Text(fmt_ms(phase.duration_ms))
            profile = Text(bar(share, BAR_WIDTH), style=style or "")
            profile.append(f" {share * 100:3.0f}%", style="dim")
        else:
            time_text, profile = Text("-", style="dim"), Text("")
        table.add_row(Text(PHASE_TITLES.get(phase.name, phase.name)), Text(state_text, style=style),
                      time_text, profile)
    return table


def quality_summary(run: LiveRun) -> Table | Text:
    if not run.quality:
        return Text("no quality results yet" if not run.finished else "no quality results", style="dim")
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold dim")
    table.add_column("result")
    table.add_column("test")
    table.add_column("severity")
    table.add_column("violations", justify="right")
    for q in sorted(run.quality, key=lambda q: QUALITY_ORDER.get(q["status"], 3)):
        icon, style = glyph(q["status"])
        table.add_row(Text(f"{icon} {quality_word(q['status'])}", style=style), q["test"], q["severity"],
                      f"{q['violations'] or 0:,}")
    return table


class PhaseTable(Static):
    def show(self, run: LiveRun, now: float, frame: int) -> None:
        self.update(phase_table(run, now, frame))


class QualitySummary(Static):
    def show(self, run: LiveRun) -> None:
        self.update(quality_summary(run))


def diff_summary(run: LiveRun) -> Group | Text:
    """The run's data diff: rows before and after, added / removed / changed, the gates' verdicts, schema changes,
    each column's NULLs, distinct values and sums (before -> after) and the sample keys."""
    diff = run.diff
    if not diff:
        return Text("no data diff", style="dim")
    head = Text()
    head.append(f"{diff.get('rows_before', 0):,} -> {diff.get('rows_after', 0):,} rows", style="bold")
    head.append(f"  {method_text(diff)}\n", style="dim")
    for part in counts_text(diff).split("  "):
        head.append(part + "  ", style={"+": "green", "-": "red", "~": "yellow"}.get(part[:1], ""))
    for change in diff.get("schema_changes") or []:
        head.append(f"\nschema: {change}", style="cyan")
    gate = diff.get("gate") or {}
    for verdict in gate.get("failed") or []:
        head.append(f"\n✗ {verdict}", style="bold red")
    for verdict in gate.get("passed") or []:
        head.append(f"\n✓ {verdict}", style="green")
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold dim")
    table.add_column("column")
    table.add_column("nulls")
    table.add_column("distinct")
    table.add_column("sum" if exact(diff) else "range")
    for row in column_rows(diff):
        table.add_row(*row)
    samples = Text()
    for kind, values in (diff.get("samples") or {}).items():
        if values:
            samples.append(f"{kind}: ", style="dim")
            samples.append(sample_text(values) + "\n")
    return Group(head, table, samples) if samples else Group(head, table)


class DiffSummary(Static):
    def show(self, run: LiveRun) -> None:
        self.update(diff_summary(run))
