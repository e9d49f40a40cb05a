"""Widgets of the run detail screen: the phase table with its profile bars, and the run's quality summary."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ratui.console.format import PHASE_STATE, SPINNER, bar, fmt_ms, glyph, spark_progress
from ratui.console.live import LiveRun
from ratui.engine.vocabulary import PHASE_TITLES

BAR_WIDTH = 24
TASK_BAR_WIDTH = 12  # a running phase's Spark tasks: the bar and "1,234/5,000 tasks" fit the profile column
QUALITY_ORDER = {"failed": 0, "error": 0, "warned": 1, "passed": 2}


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
        table.add_row(Text(f"{icon} {q['status']}", style=style), q["test"], q["severity"],
                      f"{q['violations'] or 0:,}")
    return table


class PhaseTable(Static):
    def show(self, run: LiveRun, now: float, frame: int) -> None:
        self.update(phase_table(run, now, frame))


class QualitySummary(Static):
    def show(self, run: LiveRun) -> None:
        self.update(quality_summary(run))
