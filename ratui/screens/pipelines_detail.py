"""What the Pipelines screen's detail pane shows, as Rich renderables: a pipeline (where it lives, its last run,
its config, its lineage, its quality tests, its code), a namespace's or layer's pipelines with their last status,
and a coded error with its hint. Pure: the screen hands in the compiled project and the runs it has read."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ratui.console.format import fmt_count, fmt_ms, fmt_time, glyph, short_key
from ratui.engine.errors import RatuiError
from ratui.widgets.code import code_view

# a namespace's or layer's detail lists this many of its pipelines (the rest: the tree, or the filter)
DETAIL_ROWS = 60


def error_text(error: RatuiError, root=None) -> Text:
    location = error.location or ""
    if root is not None and location.startswith(str(root) + "/"):
        location = location[len(str(root)) + 1:]
    text = Text()
    text.append(f"error[{error.code}] ", style="bold red")
    if location:
        text.append(f"{location}: ", style="red")
    text.append(error.message + "\n", style="red")
    text.append(f"  hint: {error.hint}", style="italic")
    return text


def group_detail(compiled: Any, kind: str, namespace: str, layer: str | None,
                 recent: dict[str, list[dict[str, Any]]]) -> tuple[Text, RenderableType]:
    """(head, body) of a namespace's or a layer's detail: its pipelines in run order with their last status and
    time, at most DETAIL_ROWS of them."""
    keys = [k for k in compiled.graph.order()
            if k.startswith(namespace + ".") and (kind == "namespace" or k.split(".")[1] == layer)]
    title = namespace if kind == "namespace" else f"{namespace}.{layer}"
    head = Text(f"{title} — {len(keys)} pipeline(s)", style="bold")
    table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold dim")
    table.add_column("pipeline")
    table.add_column("last")
    table.add_column("time", justify="right")
    for key in keys[:DETAIL_ROWS]:
        runs = recent.get(key, [])
        status = runs[0]["status"] if runs else None
        icon, style = glyph(status)
        table.add_row(short_key(key, namespace), Text(f"{icon} {status or 'never run'}", style=style),
                      fmt_ms(runs[0]["duration_ms"]) if runs else "-")
    more = [Text(f"… and {len(keys) - DETAIL_ROWS:,} more (in the tree; / filters)", style="dim")] \
        if len(keys) > DETAIL_ROWS else []
    return head, Group(table, *more, Text("\nr runs them all in dependency order.", style="dim"))


def pipeline_head(key: str, pipeline: Any, root: Any) -> Text:
    """The pipeline's key, its kind, its file (or folder) in the project and its description."""
    title = Text(key, style="bold")
    title.append(f"\n{pipeline.kind or 'broken'} pipeline", style="dim")
    where = pipeline.file or pipeline.folder
    if where is not None:
        title.append(f"\n{where.relative_to(root)}", style="dim")
    if pipeline.config and pipeline.config.description:
        title.append(f"\n{pipeline.config.description}", style="italic")
    return title


def pipeline_info(compiled: Any, key: str, active: list[Any], runs: list[dict[str, Any]],
                  fix: Any = None) -> RenderableType:
    """The pipeline's last run (or the one in flight), its config, lineage and quality tests. `runs`: those that
    tell its state (console/current.py); `fix`: its Fix, when it is back at its last good run's version."""
    pipeline = compiled.pipelines[key]
    parts: list[RenderableType] = [last_run_line(active, runs)]
    if fix is not None and not active:
        failed = fix.superseded[0]
        note = Text(f"  run {failed['id']} {failed['status']} on another version; the pipeline is run "
                    f"{fix.good['id']}'s version again: its table is that run's, nothing to run", style="dim")
        parts.append(note)
    if pipeline.config:
        parts.extend(config_parts(pipeline.config))
    parts.append(lineage_table(compiled.graph, key, pipeline))
    parts.append(tests_table(pipeline))
    return Group(*parts)


def last_run_line(active: list[Any], runs: list[dict[str, Any]]) -> Text:
    """`Last run` and the newest run in flight (`active`), else the last run read (`runs`, newest first)."""
    last = Text("Last run   ", style="bold")
    if active:
        run = active[-1]
        last.append(f"● {run.status}", style="cyan")
        last.append(f" · {run.current_phase or 'queued'} · run {run.run_id} · enter to watch", style="dim")
    elif runs:
        r = runs[0]
        icon, style = glyph(r["status"])
        last.append(f"{icon} {r['status']}", style=style)
        last.append(f" · {fmt_ms(r['duration_ms'])} · {fmt_count(r['rows_written'])} rows · "
                    f"{fmt_time(r['started_at'])} · run {r['id']}")
    else:
        last.append("never run — r runs it", style="dim")
    return last


def config_parts(config: Any) -> list[RenderableType]:
    """The settings set somewhere (with where: the pipeline, its folder, the project), the strategy always; how many
    are left at their defaults."""
    table = Table(box=None, padding=(0, 1), show_header=False, title="Config", title_justify="left",
                  title_style="bold")
    table.add_column(style="cyan", no_wrap=True)
    table.add_column()  # the value, then where it was set: wrapped at a narrow pane's edge, never cut to "full…"
    defaults = 0
    for name, value in config.to_dict().items():
        origin = config.origin.get(name, "default")
        if name == "description" or (origin == "default" and name != "merge_strategy"):
            defaults += name != "description"
            continue
        if isinstance(value, list):
            value = ", ".join(value)
        cell = Text(str(value))
        cell.append(f"  {origin}", style="dim")
        table.add_row(name, cell)
    parts: list[RenderableType] = [table]
    if defaults:
        parts.append(Text(f" + {defaults} settings at their defaults", style="dim"))
    return parts


def lineage_table(graph: Any, key: str, pipeline: Any) -> Table:
    """What the pipeline reads (pipelines upstream, else its landing zones) and what reads it."""
    namespace = pipeline.namespace
    lineage = Table(box=None, padding=(0, 1), show_header=False, title="Lineage", title_justify="left",
                    title_style="bold")
    lineage.add_column(style="cyan")
    lineage.add_column()
    up = graph.upstream.get(key, [])
    down = graph.downstream.get(key, [])
    zones = ", ".join(f"landing/{z}" for z in pipeline.zones)
    lineage.add_row("upstream", ", ".join(short_key(k, namespace) for k in up) or zones or "-")
    if up and zones:
        lineage.add_row("landing", zones)
    lineage.add_row("downstream", ", ".join(short_key(k, namespace) for k in sorted(down)) or "-")
    return lineage


def tests_table(pipeline: Any) -> Table:
    """The pipeline's quality tests: name, severity and description (a broken one's error code)."""
    tests = Table(box=None, padding=(0, 1), show_header=False, title=f"Quality tests ({len(pipeline.tests)})",
                  title_justify="left", title_style="bold")
    tests.add_column()
    tests.add_column(style="dim")
    tests.add_column(style="dim")
    for test in pipeline.tests:
        if test.error:
            tests.add_row(Text(test.name, style="red"), test.error.code, "")
        else:
            tests.add_row(test.name, test.severity, test.description)
    if not pipeline.tests:
        tests.add_row(Text("none", style="dim"), "", "")
    return tests


def pipeline_code(pipeline: Any, dark: bool, runs: Any = ()) -> RenderableType | None:
    """The pipeline's SQL or Python, highlighted, the lines its errors point at in this very file marked (❱): its
    compile errors', and its last run's when that run failed there (`runs`: those that tell its state)."""
    if not pipeline.text:
        return None
    here = str(pipeline.file) if pipeline.file else None
    marked = [e.line for e in pipeline.errors if e.line and here and e.file == here]
    title = Text(pipeline.kind.upper() if pipeline.kind else "", style="bold")
    last = runs[0] if runs else None
    if last and last.get("status") == "failed" and last.get("error_line") and here and last.get("error_file") == here:
        marked.append(last["error_line"])
        title.append(f"   ❱ line {last['error_line']}: where run {last['id']} failed ({last.get('error_code')})",
                     style="red")
    return Group(title,
                 code_view(pipeline.text, "sql" if pipeline.kind == "sql" else "python", dark=dark,
                           error_lines=marked))
