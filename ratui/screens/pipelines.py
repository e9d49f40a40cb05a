"""Pipelines: the project as a tree (namespace > layer > pipeline) and the selected pipeline's detail.

The tree is filled lazily: a layer's pipelines become nodes when the layer is first expanded, so a project of
thousands of pipelines paints its outline at once. A small project opens fully expanded; a large one (more than
EXPAND_ALL_UP_TO pipelines) opens with its namespaces expanded and their layers collapsed, each layer saying how
many pipelines it holds and how many last failed, except the layer of the pipeline under the cursor. `/` filters by a
case-insensitive substring of the key (namespace.layer.name), as typed; esc clears. left/right collapse and expand
a node, [ and ] collapse and expand the whole tree one level (pipelines, then layers). Last statuses, durations
and sparklines come from one history query for every pipeline (History.recent_by_pipeline), started at mount in a
worker, beside the compile. Until this launch's compile is done, the tree is drawn from the last compile's outline
(engine/project/outline.py: keys, strategies, first error codes), said as such on the ref line; what needs the
compiled project (runs, the detail pane, publish) waits for it.

The line under the tabs names the working ref: runs started here fork from it and merge into it (main, or a branch of
yours chosen on Branches). `P` publishes the selection atomically on it; `h` opens the selected table's history."""

from __future__ import annotations

import os
import shlex
import subprocess

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.app import SuspendNotSupported
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Input, Static, Tree
from textual.widgets.tree import TreeNode

from ratui.console.format import fmt_count, fmt_ms, fmt_time, glyph, short_key, sparkline
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import LAYERS
from ratui.engine.vocabulary import MAIN
from ratui.messages import PublishLaunched, RecentRunsLoaded
from ratui.screens.base import ConsoleScreen, changes, close_field, is_narrow, open_field
from ratui.widgets.code import code_view
from ratui.widgets.chrome import NavBar, StatusLine

STRATEGY_WIDTH = 13


@dataclass(frozen=True)
class _Problem:
    """An error as the outline keeps it: its code (and the project's problems their message)."""

    code: str
    message: str = ""
    hint: str | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class _Config:
    merge_strategy: str | None


@dataclass(frozen=True)
class _OutlinePipeline:
    key: str
    namespace: str
    layer: str
    name: str
    config: _Config | None
    errors: list[_Problem] = field(default_factory=list)


class OutlineView:
    """The last compile's outline in the shape the tree reads from a compiled project (its pipelines' keys,
    names, strategies and first error codes; the project's problems; the first pipeline to select). Drawn until
    this launch's compile replaces it; nothing is run or decided from it."""

    provisional = True

    def __init__(self, outline: Any) -> None:
        self.root = Path(outline.root)
        self.first: str | None = outline.first
        self.errors = [_Problem(code, message) for code, message in outline.problems]
        self.pipelines = {key: _OutlinePipeline(key, p.namespace, p.layer, p.name,
                                                _Config(p.strategy) if p.strategy else None,
                                                [_Problem(p.error)] if p.error else [])
                          for key, p in outline.pipelines.items()}


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


# a project of up to this many pipelines opens fully expanded; a larger one by layer (the module's doc)
EXPAND_ALL_UP_TO = 200
# a namespace's or layer's detail lists this many of its pipelines (the rest: the tree, or the filter)
DETAIL_ROWS = 60


class PipelineTree(Tree):
    """The project's tree; `populate(node)` fills a layer's pipelines before it first expands (lazy)."""

    BINDINGS = [
        Binding("space", "toggle_node", "Expand", show=False),
        Binding("left", "fold", "Collapse", show=False),
        Binding("right", "unfold", "Expand", show=False),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.populate: Any = lambda node: None

    def _toggle_node(self, node: TreeNode) -> None:
        if node.allow_expand and not node.is_expanded:
            self.populate(node)
        super()._toggle_node(node)

    def action_toggle_expand_all(self) -> None:
        node = self.cursor_node
        if node is not None and node.parent is not None and all(n.is_collapsed for n in node.siblings):
            for sibling in node.siblings:
                self.populate(sibling)
        super().action_toggle_expand_all()

    def action_fold(self) -> None:
        """left: collapse the node under the cursor; on a collapsed node or a pipeline, go to its parent."""
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    def action_unfold(self) -> None:
        """right: expand the node under the cursor; on an expanded one, go to its first child."""
        node = self.cursor_node
        if node is None or not node.allow_expand:
            return
        if not node.is_expanded:
            self.populate(node)
            node.expand()
        elif node.children:
            self.move_cursor(node.children[0])


class PipelinesScreen(ConsoleScreen):
    MODE = "pipelines"
    HELP_KEYS = (("↑ ↓", "Move in the tree"), ("← →", "Collapse / expand the namespace or layer"),
                 ("enter", "Open the pipeline's latest run"))
    AUTO_FOCUS = "#pipeline-tree"
    BINDINGS = [
        Binding("r", "run", "Run", id="pipelines.run"),
        Binding("plus", "run_descendants", "Run downstream", id="pipelines.run_descendants", key_display="+"),
        Binding("a", "run_all", "Run all", id="pipelines.run_all"),
        Binding("f", "full_refresh", "Full refresh", id="pipelines.full_refresh"),
        Binding("F", "force_run", "Force run", id="pipelines.force_run", key_display="F", show=False),
        Binding("c", "cancel", "Cancel", id="pipelines.cancel"),
        Binding("e", "edit", "Edit", id="pipelines.edit"),
        Binding("g", "graph", "Graph", id="pipelines.graph", show=False),  # the footer is full: in ? and the help
        Binding("t", "table", "Table", id="pipelines.table", show=False),
        Binding("h", "history", "Table history", id="pipelines.history", show=False),
        Binding("P", "publish", "Publish atomically", id="pipelines.publish", key_display="P", show=False),
        Binding("enter", "open_run", "Open run", id="pipelines.open_run", show=False),
        Binding("ctrl+r", "reload", "Reload", id="pipelines.reload"),
        Binding("slash", "filter", "Filter by name", id="pipelines.filter", key_display="/", show=False),
        Binding("escape", "clear_filter", "Clear the filter", id="pipelines.clear_filter", show=False),
        Binding("left_square_bracket", "fold_all", "Collapse all one level", id="pipelines.fold_all",
                key_display="[", show=False),
        Binding("right_square_bracket", "unfold_all", "Expand all one level", id="pipelines.unfold_all",
                key_display="]", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.recent: dict[str, list[dict[str, Any]]] = {}
        self.compiled = None  # the compiled project (everything but the tree waits for it)
        self.project: Any = None  # what the tree draws: the compiled project, or the last compile's outline
        self.nodes: dict[str, TreeNode] = {}  # the tree's nodes by key ("ns", "ns.layer", pipeline keys filled)
        self.groups: dict[str, dict[str, list[str]]] = {}  # namespace -> layer -> pipeline keys (by name)
        self.filter = ""  # the name filter (`/`), as typed
        self.selected: tuple | None = None
        self.name_width = 20
        self._recent_timer = None
        self._last_pipeline: tuple | None = None  # the last pipeline selected (kept across filters)
        self._recent_loaded = False  # the history's last runs arrived at least once
        self._recent_pending = False  # a read of them is on its way

    DEFAULT_CSS = """
    #pipelines-ref { height: 1; padding: 0 1; }
    #pipelines-filter { height: 3; margin: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield NavBar("pipelines")
        yield Static(self._ref_text(MAIN), id="pipelines-ref")
        yield Input(placeholder="filter pipelines by name (as you type; enter keeps it, esc clears)",
                    id="pipelines-filter", classes="hidden")
        with Horizontal(id="pipelines-main"):
            tree: PipelineTree = PipelineTree("project", id="pipeline-tree")
            tree.show_root = False
            tree.guide_depth = 2
            tree.loading = True
            yield tree
            with VerticalScroll(id="pipeline-detail"):
                yield Static(id="detail-head")
                yield Static(id="detail-errors")
                yield Static(id="detail-info")
                yield Static(id="detail-sql")
        yield StatusLine()
        yield Footer()

    # ------------------------------------------------------------------------------------ working ref

    @staticmethod
    def _ref_text(ref: str, shown: tuple[str, int, int] | None = None, large: bool = False) -> Text:
        """The working ref; `shown`: (filter, pipelines it matches, pipelines in all) while a filter is on."""
        text = Text()
        if shown is not None:
            what, matched, total = shown
            text.append("filter ", style="bold yellow")
            text.append(what, style="bold reverse yellow")
            text.append(f" {matched:,} of {total:,} · esc clears · ", style="yellow")
        if ref == MAIN:
            text.append("⎇ on main", style="bold cyan")
            hints = " · / filter · [ ] fold" if large and shown is None else ""
            text.append(f" · runs merge into main{hints} · 4 Branches switches · h history · P publish",
                        style="dim")
        else:
            text.append(f" ⎇ on {ref} ", style="bold reverse yellow")
            text.append(f" runs fork from and merge into {ref}; main untouched · P publish", style="dim")
        return text

    def show_ref(self) -> None:
        shown = None
        if self.filter and self.project is not None:
            shown = (self.filter, len(self._matching()), len(self.project.pipelines))
        large = self.project is not None and len(self.project.pipelines) > EXPAND_ALL_UP_TO
        text = self._ref_text(self.app.controller.ref, shown, large)
        if self.compiled is None and self.project is not None:
            text = Text("as last compiled · checking the project…", style="bold yellow")
        self.query_one("#pipelines-ref", Static).update(text)

    def on_screen_resume(self) -> None:
        self.show_ref()  # the working ref may have changed on Branches

    # ------------------------------------------------------------------------------------------ data

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#pipelines-filter", Input).cursor_blink = self.app.cursor_blink
        self.query_one(PipelineTree).populate = self._populate
        # the SQL's colours follow the theme (ansi_dark / ansi_light)
        self.watch(self.app, "theme", lambda _: self.show_detail() if self.compiled is not None else None,
                   init=False)
        # the history is read beside the compile (one query for every pipeline: it needs no project)
        self.app.project_outlined.subscribe(self, self.outline_ready)
        if self.app.compiled is None:
            self._load_recent()
            if self.app.outline is not None:
                self.call_later(self.outline_ready, self.app.outline)

    def _load_recent(self) -> None:
        self._recent_pending = True
        self.load(RecentRunsLoaded, self.app.controller.recent)

    NEEDS_COMPILE = frozenset({"run", "run_descendants", "run_all", "full_refresh", "force_run", "cancel", "edit",
                               "graph", "table", "history", "publish", "open_run"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the tree is the last compile's outline, what needs the compiled project is shown disabled."""
        if action in self.NEEDS_COMPILE and self.compiled is None:
            return None
        return True

    def outline_ready(self, outline) -> None:
        """The last compile's outline, read at launch: draw the tree from it until the compile is done."""
        if self.compiled is not None or self.project is not None:
            return
        self.project = OutlineView(outline)
        self.show_ref()
        self.build_tree()
        self.call_after_refresh(self.app.mark, "outline_painted")

    def project_ready(self, compiled) -> None:
        first = self.compiled is None
        self.compiled = self.project = compiled
        if first:
            self.refresh_bindings()
        self.show_ref()
        self.build_tree()
        self.call_after_refresh(self.app.mark, "tree_painted")
        if first and self._recent_loaded:  # read at mount, beside the compile, and here first
            self._recent_shown()
        elif not (first and self._recent_pending):  # (again) now; or it is on its way
            self._load_recent()

    def load_failed(self, kind, error: BaseException) -> bool:
        if kind is PublishLaunched and isinstance(error, RatuiError):  # nothing was queued, nothing changed
            self.notify(f"NOT published: {error.code} {error.message}\nhint: {error.hint}", title="Publish",
                        severity="error", timeout=12, markup=False)
            return True
        # the engine did not open: the boot's own error (the error screen) says why, once
        return kind is RecentRunsLoaded and self.app.controller.engine is None

    def project_error(self, error: BaseException) -> None:
        super().project_error(error)
        head = self.query_one("#detail-head", Static)
        text = Text("The project could not be opened.\n", style="bold red")
        if isinstance(error, RatuiError):
            text.append(f"{error.code} {error.message}", style="red")
        else:
            text.append(f"{type(error).__name__}: {error}", style="red")
        text.append("\nFix it, then press ctrl+r to reload.", style="dim")
        head.update(text)

    @on(RecentRunsLoaded)
    def _recent_loaded_message(self, message: RecentRunsLoaded) -> None:
        self.recent = message.value
        self._recent_loaded = True
        self._recent_pending = False
        if self.project is not None:
            self._recent_shown()

    def _recent_shown(self) -> None:
        self.refresh_labels()
        self.show_detail()
        self.query_one(PipelineTree).loading = False
        if self.compiled is not None:
            self.app.mark("pipelines_ready")

    def state_changed(self, item) -> None:
        # a run of another process started or ended: the tree's last status and times follow
        if self.compiled is not None and self._recent_timer is None:
            self._recent_timer = self.set_timer(0.3, self._reload_recent)

    def _reload_recent(self) -> None:
        self._recent_timer = None
        self._load_recent()

    def runs_changed(self, change) -> None:
        if self.compiled is None:
            return
        runs = [self.app.store.get(r) for r in change.changed]
        self.refresh_labels({run.pipeline for run in runs if run is not None})
        if change.ended:
            self._load_recent()
        elif self.selected and self.selected[0] == "pipeline":
            self.show_detail()

    # ------------------------------------------------------------------------------------------ tree

    def build_tree(self) -> None:
        """The tree's outline: namespaces and layers, and the pipelines of the layers shown expanded (lazy: the
        others are filled when first expanded). Keeps the selection when it is still there."""
        compiled = self.project
        tree = self.query_one(PipelineTree)
        keep = self.selected if self.selected and self.selected[0] == "pipeline" else self._last_pipeline
        self.groups = self._group()
        self.name_width = self._name_width()
        tree.clear()
        self.nodes = {}
        matching = self._matching()
        shown = self._group(matching) if self.filter else self.groups
        if compiled.errors and not self.filter:
            problems = tree.root.add(Text(f"⚠ {len(compiled.errors)} project problem(s)", style="bold red"),
                                     data=("problems",), expand=True)
            for error in compiled.errors:
                problems.add_leaf(Text(f"{error.code} {error.message}", style="red"), data=("problem", error))
        target_key = None
        if keep and keep[0] == "pipeline" and keep[1] in matching:
            target_key = keep[1]
        elif matching:
            if self.filter:
                target_key = next((k for ns in shown for keys in shown[ns].values() for k in keys), None)
            else:
                target_key = self._first_key()
        everything = len(matching) <= EXPAND_ALL_UP_TO
        target_group = tuple(target_key.split(".")[:2]) if target_key else None
        for ns in shown:
            ns_node = tree.root.add(self._group_label(ns), data=("namespace", ns), expand=True)
            self.nodes[ns] = ns_node
            for layer in shown[ns]:
                layer_node = ns_node.add(self._group_label(ns, layer), data=("layer", ns, layer), expand=False)
                self.nodes[f"{ns}.{layer}"] = layer_node
                if everything or (ns, layer) == target_group:
                    self._populate(layer_node)
                    layer_node.expand()
        if self.filter and not matching:
            tree.root.add_leaf(Text(f"no pipeline matches “{self.filter}”", style="dim"), data=("nomatch",))
        target = self.nodes.get(target_key) if target_key else None
        tree.loading = False
        if not self.query_one("#pipelines-filter", Input).has_focus:
            tree.focus()
        tree.scroll_home(animate=False, immediate=True)
        if target is not None:
            tree.move_cursor_to_line(0)  # lays the lines out, so the target node knows its line
            tree.cursor_line = target.line  # no scroll yet: the tree may not have its height (see below)
            self.selected = self._last_pipeline = target.data
        elif tree.root.children:
            tree.move_cursor_to_line(0)
            self.selected = tree.root.children[0].data
        else:
            self.selected = None
        self.call_after_refresh(self._scroll_to_cursor)
        self.show_detail()

    def _first_key(self) -> str | None:
        """The pipeline selected first: the first in run order."""
        if self.compiled is None:
            return self.project.first
        first = self.compiled.graph.order()[:1] or sorted(self.compiled.pipelines)[:1]
        return first[0] if first else None

    def _scroll_to_cursor(self) -> None:
        """Down to the cursor only as far as needed: the namespace and layer above the first pipeline stay in
        view. (Computed from the tree's size: while it was covered by its loading indicator it had no region, and
        the tree's own scroll to a node put the node's line at the top.)"""
        tree = self.query_one(PipelineTree)
        line, height = tree.cursor_line, tree.size.height
        if line >= 0 and height > 0:
            tree.scroll_to(y=max(0, line - height + 2) if line >= height - 1 else 0, animate=False, immediate=True)

    def _group(self, keys: list[str] | None = None) -> dict[str, dict[str, list[str]]]:
        """namespace -> layer -> pipeline keys (namespaces by name, layers bronze/silver/gold first, pipelines
        by name) of `keys` (default: every pipeline)."""
        pipelines = self.project.pipelines
        by_ns: dict[str, dict[str, list]] = {}
        for key in (pipelines if keys is None else keys):
            pipeline = pipelines[key]
            by_ns.setdefault(pipeline.namespace, {}).setdefault(pipeline.layer, []).append(pipeline)
        out: dict[str, dict[str, list[str]]] = {}
        for ns in sorted(by_ns):
            layers = sorted(by_ns[ns], key=lambda x: (LAYERS.index(x) if x in LAYERS else 99, x))
            out[ns] = {layer: [p.key for p in sorted(by_ns[ns][layer], key=lambda p: p.name)] for layer in layers}
        return out

    def _matching(self) -> list[str]:
        """The pipelines the filter lets through: a case-insensitive substring of the key (plain text, never a
        pattern), every pipeline without a filter."""
        keys = list(self.project.pipelines) if self.project is not None else []
        needle = self.filter.strip().casefold()
        if not needle:
            return keys
        return [k for k in keys if needle in k.casefold()]

    def _populate(self, node: TreeNode) -> None:
        """Fill a layer's pipelines (the filter's matches) when it is first expanded."""
        data = node.data
        if not data or data[0] != "layer" or node.children:
            return
        keys = self.groups.get(data[1], {}).get(data[2], [])
        if self.filter:
            needle = self.filter.strip().casefold()
            keys = [k for k in keys if needle in k.casefold()]
        for key in keys:
            self.nodes[key] = node.add_leaf(self.label(key), data=("pipeline", key))

    def _group_label(self, ns: str, layer: str | None = None) -> Text:
        """A namespace or layer: its pipelines (shown by the filter) and how many last failed."""
        if layer is None:
            keys = [k for keys in self.groups.get(ns, {}).values() for k in keys]
        else:
            keys = self.groups.get(ns, {}).get(layer, [])
        if self.filter:
            needle = self.filter.strip().casefold()
            keys = [k for k in keys if needle in k.casefold()]
        text = Text(ns if layer is None else layer, style="bold")
        text.append(f" ({len(keys)})", style="bold")
        failed = sum(1 for k in keys if (self.recent.get(k) or [{}])[0].get("status") == "failed")
        active = {run.pipeline for run in self.app.store.active()}
        running = sum(1 for k in keys if k in active)
        if running:
            icon, style = glyph("running")
            text.append(f" {icon} {running}", style=style)
        if failed:
            icon, style = glyph("failed")
            text.append(f" {icon} {failed}", style=style)
        return text

    def _name_width(self) -> int:
        names = [p.name for p in self.project.pipelines.values()] if self.project else []
        return min(20 if self.narrow else 28, max([14, *map(len, names)]))

    def select_key(self, key: str) -> None:
        """Select a pipeline in the tree (the jump to a pipeline by name): its layer is filled and expanded (a
        filter that hides it is cleared)."""
        if self.compiled is None or key not in self.compiled.pipelines:
            return
        if key not in self.nodes and self.filter and key not in self._matching():
            self._set_filter("")
        tree = self.query_one(PipelineTree)
        if key not in self.nodes:
            ns, layer = key.split(".")[:2]
            layer_node = self.nodes.get(f"{ns}.{layer}")
            if layer_node is None:
                return
            self._populate(layer_node)
        node = self.nodes.get(key)
        if node is None:
            return
        parent = node.parent
        while parent is not None:
            parent.expand()
            parent = parent.parent
        tree.move_cursor_to_line(0)
        tree.move_cursor(node)
        tree.focus()
        self.selected = node.data
        self.show_detail()

    # ---------------------------------------------------------------------------------- filter, fold

    def action_filter(self) -> None:
        if self.project is not None:
            open_field(self.query_one("#pipelines-filter", Input), self.filter)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "pipelines-filter":
            event.stop()
            if event.value != self.filter and not event.input.has_class("hidden"):
                self._set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "pipelines-filter":
            event.stop()
            close_field(event.input, self.query_one(PipelineTree))

    def action_clear_filter(self) -> None:
        field = self.query_one("#pipelines-filter", Input)
        if not field.has_class("hidden"):
            close_field(field, self.query_one(PipelineTree))
        if self.filter:
            self._set_filter("")

    def _set_filter(self, text: str) -> None:
        self.filter = text
        if self.project is not None:
            self.build_tree()
            self.show_ref()

    def action_fold_all(self) -> None:
        """[: collapse the whole tree one level: every layer (the namespaces show their layers), then every
        namespace."""
        tree = self.query_one(PipelineTree)
        layers = [n for k, n in self.nodes.items() if n.data and n.data[0] == "layer"]
        spaces = [n for n in tree.root.children if n.data and n.data[0] == "namespace"]
        open_layers = [n for n in layers if n.is_expanded and n.parent is not None and n.parent.is_expanded]
        cursor = tree.cursor_node
        for node in open_layers or spaces:
            node.collapse()
        if cursor is not None and cursor.data and cursor.data[0] == "pipeline" and cursor.parent is not None:
            tree.move_cursor(cursor.parent if open_layers else cursor.parent.parent)
        elif cursor is not None and cursor.data and cursor.data[0] == "layer" and not open_layers:
            tree.move_cursor(cursor.parent)

    def action_unfold_all(self) -> None:
        """]: expand the whole tree one level: every namespace, then every layer (filled as they open)."""
        tree = self.query_one(PipelineTree)
        spaces = [n for n in tree.root.children if n.data and n.data[0] == "namespace"]
        closed = [n for n in spaces if not n.is_expanded]
        if closed:
            for node in closed:
                node.expand()
            return
        for node in [n for n in self.nodes.values() if n.data and n.data[0] == "layer"]:
            self._populate(node)
            node.expand()

    def label(self, key: str) -> Text:
        pipeline = self.project.pipelines[key]
        text = Text()
        name = pipeline.name.ljust(self.name_width)[: self.name_width]
        if pipeline.errors:
            text.append("✘ ", style="bold red")
            text.append(name, style="red")
            text.append(f" {pipeline.errors[0].code}", style="red")
            return text
        active = self.app.store.active_for(key)
        runs = self.recent.get(key, [])
        if active:
            icon, style = glyph("running")
            run = active[-1]
            phase = run.current_phase or run.status
            fraction = run.spark.fraction if run.spark is not None else None
            if fraction is not None:  # Spark's progress of the phase's running job
                status_text = Text(f"{phase[:4]} {fraction * 100:2.0f}%".rjust(8), style="cyan")
            else:
                status_text = Text(f"{phase:>8}", style="cyan")
        elif runs:
            icon, style = glyph(runs[0]["status"])
            status_text = Text(f"{fmt_ms(runs[0]['duration_ms']):>8}")
        else:
            icon, style = glyph(None)
            status_text = Text(f"{'-':>8}", style="dim")
        text.append(f"{icon} ", style=style)
        text.append(name)
        text.append(" ")
        text.append_text(status_text)
        if self.narrow:  # the name, its state and time win; strategy and history are in the detail pane
            return text
        strategy = pipeline.config.merge_strategy if pipeline.config else "?"
        text.append(f" {strategy:<{STRATEGY_WIDTH}}", style="dim")
        text.append(" ")
        text.append(sparkline([r["duration_ms"] for r in reversed(runs)], 8), style="cyan")
        return text

    @property
    def narrow(self) -> bool:
        return is_narrow(self.app.size.width)

    def fit(self, narrow: bool) -> None:
        super().fit(narrow)
        if self.project is not None and self.nodes:
            self.name_width = self._name_width()
            self.refresh_labels()

    def refresh_labels(self, keys: set[str] | None = None) -> None:
        """The labels of the pipelines in the tree (default: all of them filled so far; `keys`: these, with
        their layers and namespaces)."""
        if self.project is None:
            return
        for key in (self.nodes if keys is None else keys):
            node = self.nodes.get(key)
            if node is None or not node.data:
                continue
            if node.data[0] == "pipeline":
                node.set_label(self.label(key))
            elif keys is None:
                node.set_label(self._group_label(*node.data[1:]))
        if keys is not None:
            for group in {g for key in keys for g in (key.split(".")[0], ".".join(key.split(".")[:2]))}:
                node = self.nodes.get(group)
                if node is not None:
                    node.set_label(self._group_label(*node.data[1:]))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.selected = event.node.data
        if self.selected and self.selected[0] == "pipeline":
            self._last_pipeline = self.selected
        self.show_detail()

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        self._populate(event.node)  # an expansion Textual made itself (the tree's keys fill first)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if event.node.data and event.node.data[0] == "pipeline":
            self.action_open_run()

    # ---------------------------------------------------------------------------------------- detail

    def show_detail(self) -> None:
        if self.compiled is None:
            if self.project is not None:  # drawn from the outline: the detail needs the compiled project
                self.query_one("#detail-head", Static).update(Text(
                    f"Checking the project ({len(self.project.pipelines):,} pipelines as last compiled)…",
                    style="dim"))
            return
        head = self.query_one("#detail-head", Static)
        errors = self.query_one("#detail-errors", Static)
        info = self.query_one("#detail-info", Static)
        sql = self.query_one("#detail-sql", Static)
        data = self.selected
        root = self.compiled.root
        errors.update("")
        errors.add_class("hidden")
        sql.update("")
        if not data:
            head.update(Text("No pipelines in this project yet.", style="dim"))
            info.update("")
            return
        kind = data[0]
        if kind == "pipeline":
            self._show_pipeline(data[1], head, errors, info, sql)
        elif kind == "problem":
            head.update(Text("Project problem", style="bold red"))
            errors.update(error_text(data[1], root))
            errors.remove_class("hidden")
            info.update("")
        elif kind == "nomatch":
            head.update(Text(f"No pipeline matches “{self.filter}”.", style="dim"))
            info.update(Text("esc clears the filter; / changes it.", style="dim"))
        elif kind == "problems":
            head.update(Text("Project problems", style="bold red"))
            errors.update(Group(*(error_text(e, root) for e in self.compiled.errors)))
            errors.remove_class("hidden")
            info.update("")
        else:
            keys = [k for k in self.compiled.graph.order()
                    if k.startswith(data[1] + ".") and (kind == "namespace" or k.split(".")[1] == data[2])]
            title = data[1] if kind == "namespace" else f"{data[1]}.{data[2]}"
            head.update(Text(f"{title} — {len(keys)} pipeline(s)", style="bold"))
            table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold dim")
            table.add_column("pipeline")
            table.add_column("last")
            table.add_column("time", justify="right")
            for key in keys[:DETAIL_ROWS]:
                runs = self.recent.get(key, [])
                status = runs[0]["status"] if runs else None
                icon, style = glyph(status)
                table.add_row(short_key(key, data[1]), Text(f"{icon} {status or 'never run'}", style=style),
                              fmt_ms(runs[0]["duration_ms"]) if runs else "-")
            more = [Text(f"… and {len(keys) - DETAIL_ROWS:,} more (in the tree; / filters)", style="dim")] \
                if len(keys) > DETAIL_ROWS else []
            info.update(Group(table, *more, Text("\nr runs them all in dependency order.", style="dim")))

    def _show_pipeline(self, key: str, head: Static, errors: Static, info: Static, sql: Static) -> None:
        compiled = self.compiled
        pipeline = compiled.pipelines.get(key)
        if pipeline is None:
            return
        root = compiled.root
        ns = pipeline.namespace
        title = Text(key, style="bold")
        title.append(f"\n{pipeline.kind or 'broken'} pipeline", style="dim")
        where = pipeline.file or pipeline.folder
        if where is not None:
            title.append(f"\n{where.relative_to(root)}", style="dim")
        if pipeline.config and pipeline.config.description:
            title.append(f"\n{pipeline.config.description}", style="italic")
        head.update(title)
        if pipeline.errors:
            errors.update(Group(*(error_text(e, root) for e in pipeline.errors)))
            errors.remove_class("hidden")
        parts: list[RenderableType] = []
        active = self.app.store.active_for(key)
        runs = self.recent.get(key, [])
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
        parts.append(last)
        if pipeline.config:
            table = Table(box=None, padding=(0, 1), show_header=False, title="Config", title_justify="left",
                          title_style="bold")
            table.add_column(style="cyan", no_wrap=True)
            table.add_column()
            table.add_column(style="dim", no_wrap=True)
            defaults = 0
            for name, value in pipeline.config.to_dict().items():
                origin = pipeline.config.origin.get(name, "default")
                if name == "description" or (origin == "default" and name != "merge_strategy"):
                    defaults += name != "description"
                    continue
                if isinstance(value, list):
                    value = ", ".join(value)
                table.add_row(name, str(value), origin)
            parts.append(table)
            if defaults:
                parts.append(Text(f" + {defaults} settings at their defaults", style="dim"))
        lineage = Table(box=None, padding=(0, 1), show_header=False, title="Lineage", title_justify="left",
                        title_style="bold")
        lineage.add_column(style="cyan")
        lineage.add_column()
        up = compiled.graph.upstream.get(key, [])
        down = compiled.graph.downstream.get(key, [])
        zones = ", ".join(f"landing/{z}" for z in pipeline.zones)
        lineage.add_row("upstream", ", ".join(short_key(k, ns) for k in up) or zones or "-")
        if up and zones:
            lineage.add_row("landing", zones)
        lineage.add_row("downstream", ", ".join(short_key(k, ns) for k in sorted(down)) or "-")
        parts.append(lineage)
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
        parts.append(tests)
        info.update(Group(*parts))
        if pipeline.text:
            # the lines its errors point at in this very file are marked
            marked = [e.line for e in pipeline.errors if e.line and pipeline.file and e.file == str(pipeline.file)]
            sql.update(Group(Text(pipeline.kind.upper() if pipeline.kind else "", style="bold"),
                             code_view(pipeline.text, "sql" if pipeline.kind == "sql" else "python",
                                       dark=self.app.current_theme.dark, error_lines=marked)))

    # --------------------------------------------------------------------------------------- actions

    def _selected_keys(self) -> list[str]:
        data = self.selected
        if not data or self.compiled is None:
            return []
        if data[0] == "pipeline":
            return [data[1]]
        if data[0] == "namespace":
            return [k for k in self.compiled.graph.order() if k.split(".")[0] == data[1]]
        if data[0] == "layer":
            return [k for k in self.compiled.graph.order() if k.split(".")[:2] == [data[1], data[2]]]
        return []

    def action_run(self) -> None:
        keys = self._selected_keys()
        if not keys:
            self.notify("Select a pipeline to run.", severity="warning")
        elif len(keys) == 1:
            self.app.run_pipeline(keys[0])
        else:
            self.app.run_batch(keys, f"{len(keys)} pipelines")

    def action_force_run(self) -> None:
        """Run the selection even when nothing changed (the CLI's --force)."""
        keys = self._selected_keys()
        if not keys:
            self.notify("Select a pipeline to run.", severity="warning")
        elif len(keys) == 1:
            self.app.run_pipeline(keys[0], force=True)
        else:
            self.app.run_batch(keys, f"{len(keys)} pipelines (forced)", force=True)

    def action_full_refresh(self) -> None:
        keys = self._selected_keys()
        if len(keys) == 1:
            self.app.run_pipeline(keys[0], full_refresh=True)
        elif keys:
            self.app.run_batch(keys, f"{len(keys)} pipelines (full refresh)", full_refresh=True)

    def action_run_descendants(self) -> None:
        keys = self._selected_keys()
        if len(keys) != 1:
            self.notify("Select one pipeline: + runs it and everything downstream of it.", severity="warning")
            return
        key = keys[0]
        chosen = {key, *self.compiled.graph.descendants(key)}
        self.app.run_batch(self.compiled.graph.order(chosen), f"{short_key(key, key.split('.')[0])}+")

    def action_run_all(self) -> None:
        if self.compiled is not None:
            self.app.run_batch(self.compiled.graph.order(), "all pipelines", whole_project=True)

    @changes("editing a pipeline's file")
    def action_edit(self) -> None:
        """Open the selected pipeline's file in $VISUAL / $EDITOR (vi without either); the console hands the
        terminal over, takes it back when the editor exits, and reloads the project."""
        keys = self._selected_keys()
        pipeline = self.compiled.pipelines.get(keys[0]) if len(keys) == 1 and self.compiled else None
        if pipeline is None or pipeline.file is None:
            self.notify("Select a pipeline to edit its file.", severity="warning")
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            with self.app.suspend():
                subprocess.run([*shlex.split(editor), str(pipeline.file)], check=False)
        except SuspendNotSupported:
            self.notify("This terminal cannot be handed to an editor.", severity="warning")
            return
        except OSError as exc:
            self.notify(f"Could not start the editor '{editor}': {exc}. Set $EDITOR.", severity="error",
                        markup=False)
            return
        self.app.reload_project()

    def action_table(self) -> None:
        """The selected pipeline's table on the working ref: schema, history, column statistics, preview."""
        from ratui.screens.table_view import TableViewScreen

        keys = self._selected_keys()
        if len(keys) != 1:
            self.app.notify("Select one pipeline: t shows its table.", severity="warning", timeout=3)
            return
        self.app.push_screen(TableViewScreen(keys[0], self.app.controller.ref, origin="pipelines"))

    def action_history(self) -> None:
        """The commits that changed the selected pipeline's table on the working ref (rollback from there)."""
        from ratui.screens.history import HistoryScreen

        keys = self._selected_keys()
        if len(keys) != 1:
            self.app.notify("Select one pipeline: h shows its table's history.", severity="warning", timeout=3)
            return
        self.app.push_screen(HistoryScreen(self.app.controller.ref, keys[0], origin="pipelines"))

    @changes("publishing")
    def action_publish(self) -> None:
        """Atomic publish on the working ref: the selected layer or namespace, or the selected pipeline with
        everything downstream of it, run on a publish branch; the working ref moves once, only if every run
        passed. A notification says what was published (or why nothing was) when the batch ends."""
        keys = self._selected_keys()
        if not keys or self.compiled is None:
            self.notify("Select a pipeline, a layer or a namespace to publish.", severity="warning")
            return
        if len(keys) == 1:
            key = keys[0]
            keys = self.compiled.graph.order({key, *self.compiled.graph.descendants(key)})
            label = f"{short_key(key, key.split('.')[0])}+"
        else:
            label = f"{len(keys)} pipelines"
        problems = [e for k in keys for e in self.compiled.pipelines[k].errors]
        if problems:
            first = problems[0]
            self.notify(f"{len(problems)} problem(s) in the selection: nothing was published.\n{first.code} "
                        f"{first.message}\nhint: {first.hint}", title=f"Cannot publish {label}", severity="error",
                        timeout=12, markup=False)
            return
        ref = self.app.controller.ref
        self.notify(f"Publishing {label} on {ref}: {len(keys)} pipeline(s) on a publish branch; {ref} moves once, "
                    "only if all pass.", title="Atomic publish", timeout=4, markup=False)
        self.load(PublishLaunched, self.app.controller.start_batch, keys, atomic=True)

    @on(PublishLaunched)
    def _publish_launched(self, message: PublishLaunched) -> None:
        from ratui.screens.run import RunScreen

        self.app.push_screen(RunScreen(batch=message.value.id, origin="pipelines"))

    def action_graph(self) -> None:
        """The selected pipeline on the Lineage screen."""
        keys = self._selected_keys()
        if len(keys) == 1:
            self.app.show_pipeline(keys[0], "lineage")
        else:
            self.app.action_open("lineage")

    def action_cancel(self) -> None:
        runs = [r for k in self._selected_keys() for r in self.app.store.active_for(k)]
        if not runs:
            self.notify("Nothing to cancel: no run of the selection is in flight.", severity="warning")
            return
        self.app.confirm_cancel([r.run_id for r in runs])

    def action_open_run(self) -> None:
        keys = self._selected_keys()
        if len(keys) != 1:
            return
        active = self.app.store.active_for(keys[0])
        if active:
            self.app.open_run(active[-1].run_id)
        elif self.recent.get(keys[0]):
            self.app.open_run(self.recent[keys[0]][0]["id"])
        else:
            self.notify("No runs yet: press r to run it.")

    def action_reload(self) -> None:
        if self.app.compiled is None and self.app.boot_error is not None:
            self.app.retry_boot()
        else:
            self.app.reload_project()
