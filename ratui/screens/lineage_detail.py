"""What the Lineage screen says in words: the line above the graph (the whole graph, or the focus with its depth and
how much it shows), and the lines under it about the selection (a pipeline: its strategy, how much is upstream and
downstream in the project, its state; a group node: whose parents or children it stands for)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from rich.text import Text

from ratui.console.format import fmt_age, fmt_time, glyph
from ratui.console.lineage.focus import BUDGET, Focus
from ratui.console.lineage.view import View


def view_line(shown: View) -> Text:
    """The line above the graph: what it shows (the whole graph, or the focus, its depth and how much)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    total = f"{shown.total:,} pipeline{'s' if shown.total != 1 else ''}"
    if shown.whole or shown.focus is None:
        text.append("Whole graph", style="bold")
        text.append(f" · {total} · c columns · / finds a pipeline · f focuses on the selection", style="dim")
        return text
    near = shown.focus
    text.append("Focus ", style="dim")
    text.append(near.key, style="bold")
    if len(near.nodes) == 1:
        text.append(" · no upstream, no downstream", style="dim")
    else:
        text.append(f" · depth {near.depth} (+/-)", style="dim")
    text.append(f" · {len(near.pipelines):,} of {total}", style="dim")
    if near.beyond:
        text.append(f" · {near.beyond:,} more within this depth left out (a view draws {BUDGET})", style="yellow")
    text.append(" · c columns · / find" + (" · a whole graph" if shown.fits else ""), style="dim")
    return text


def pipeline_detail(key: str, compiled: Any, status: str | None, active: list[Any],
                    runs: list[dict[str, Any]] | None, now: datetime) -> Text:
    """A selected pipeline: its key and strategy, its upstream and downstream in the whole project (whatever the
    view shows), and its state: `status` (error, running, the last run's status or None), its runs in flight
    (`active`) or its last runs read (`runs`, newest first)."""
    pipeline = compiled.pipelines.get(key)
    text = Text()
    text.append(key, style="bold")
    strategy = pipeline.config.merge_strategy if pipeline is not None and pipeline.config else None
    if strategy:
        text.append(f"  {strategy}", style="dim")
    graph = compiled.graph
    ancestors, descendants = graph.ancestors(key) - {key}, graph.descendants(key) - {key}
    text.append(f"  ↑ {len(ancestors)} upstream · ↓ {len(descendants)} downstream", style="dim")
    text.append("\n")
    icon, style = glyph(status)
    if status == "error" and pipeline is not None:
        error = pipeline.errors[0]
        text.append(f"{icon} {error.code} {error.message}", style=style)
    elif active:
        run = active[-1]
        text.append(f"{icon} {run.status}", style=style)
        text.append(f" · {run.current_phase or 'queued'} · run {run.run_id}", style="dim")
    elif runs:
        last = runs[0]
        text.append("last run ", style="dim")
        text.append(f"{icon} {last['status']}", style=style)
        when = last.get("started_at") or last.get("queued_at")
        text.append(f" {fmt_time(when)} ({fmt_age(when, now)} ago) · run {last['id']}")
    else:
        text.append(f"{icon} never run", style=style)
        text.append(" · r runs it", style="dim")
    return text


def group_detail(near: Focus, key: str, short: Callable[[str], str], fan: int) -> Text:
    """A group node ("… and N more"): how many parents or children of which pipeline it stands for, and why they
    are not drawn (a pipeline shows at most `fan` neighbours each way)."""
    if key not in near.hidden:
        return Text()
    direction, owner = near.group_of(key)
    members = near.hidden[key]
    kin = "parents" if direction == "up" else "children"
    text = Text()
    text.append(f"{len(members):,} more {kin} of {short(owner)}", style="bold")
    text.append(f", not drawn: a pipeline shows at most {fan} here", style="dim")
    text.append("\nenter lists them (and focuses on the one you pick) · / finds any pipeline", style="dim")
    return text
