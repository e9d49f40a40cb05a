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
yours chosen on Branches). `P` publishes the selection atomically on it; `h` opens the selected table's history.

This module is the screen's life: its frame, what it reads and when, the tree built from the project. Its other
jobs are beside it: the tree widget, grouping and labels (pipelines_tree.py), the name filter, the ref line and
folding (pipelines_filter.py), the detail pane (pipelines_detail.py), what its keys start (pipelines_actions.py)
and the last compile's outline (pipelines_outline.py)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Input, Static, Tree
from textual.widgets.tree import TreeNode

from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN
from ratui.console.current import state_runs
from ratui.messages import FixesLoaded, PublishLaunched, RecentRunsLoaded
from ratui.screens.base import ConsoleScreen, is_narrow
from ratui.screens.pipelines_actions import PipelineActions
from ratui.screens.pipelines_detail import error_text, group_detail, pipeline_code, pipeline_head, pipeline_info
from ratui.screens.pipelines_filter import PipelineFilter, ref_line
from ratui.screens.pipelines_outline import OutlineView
from ratui.screens.pipelines_tree import (
    EXPAND_ALL_UP_TO, PipelineTree, group_by_layer, group_label, let_through, name_width, pipeline_label,
)
from ratui.widgets.chrome import NavBar, StatusLine


class PipelinesScreen(PipelineActions, PipelineFilter, ConsoleScreen):
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
        self.recent: dict[str, list[dict[str, Any]]] = {}  # each pipeline's last runs, newest first, as read
        self.fixes: dict[str, Any] = {}  # pipeline -> its Fix: back at its last good run's version since it failed
        self.shown: dict[str, list[dict[str, Any]]] = {}  # the runs that tell each one's state (current.py)
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
        yield Static(ref_line(MAIN), id="pipelines-ref")
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
            self.notify(f"NOT published: {error.text()}", title="Publish",
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
        self._apply_fixes(self.fixes)
        if self.project is not None:
            self._recent_shown()

    def _recent_shown(self) -> None:
        if self.compiled is not None:  # which failures are the state still, now that the definitions are known
            self.load(FixesLoaded, self.app.controller.fixes, self.compiled, self.recent)
        self.refresh_labels()
        self.show_detail()
        self.query_one(PipelineTree).loading = False
        if self.compiled is not None:
            self.app.mark("pipelines_ready")

    @on(FixesLoaded)
    def _fixes_loaded(self, message: FixesLoaded) -> None:
        if message.value != self.fixes:
            self._apply_fixes(message.value)
            self.refresh_labels()
            self.show_detail()

    def _apply_fixes(self, fixes: dict[str, Any]) -> None:
        self.fixes = fixes
        self.shown = {key: state_runs(runs, fixes.get(key)) for key, runs in self.recent.items()}

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
        """namespace -> layer -> pipeline keys of `keys` (default: every pipeline)."""
        return group_by_layer(self.project.pipelines, keys)

    def _populate(self, node: TreeNode) -> None:
        """Fill a layer's pipelines (the filter's matches) when it is first expanded."""
        data = node.data
        if not data or data[0] != "layer" or node.children:
            return
        for key in let_through(self.groups.get(data[1], {}).get(data[2], []), self.filter):
            self.nodes[key] = node.add_leaf(self.label(key), data=("pipeline", key))

    def _group_label(self, ns: str, layer: str | None = None) -> Text:
        """A namespace or layer: its pipelines (shown by the filter), how many run now and how many last failed."""
        if layer is None:
            keys = [k for keys in self.groups.get(ns, {}).values() for k in keys]
        else:
            keys = self.groups.get(ns, {}).get(layer, [])
        active = {run.pipeline for run in self.app.store.active()}
        return group_label(ns if layer is None else layer, let_through(keys, self.filter), self.shown, active)

    def _name_width(self) -> int:
        return name_width([p.name for p in self.project.pipelines.values()] if self.project else [], self.narrow)

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

    def label(self, key: str) -> Text:
        return pipeline_label(self.project.pipelines[key], self.shown.get(key, []), self.app.store.active_for(key),
                              self.name_width, self.narrow)

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
            title, body = group_detail(self.compiled, kind, data[1], data[2] if kind == "layer" else None,
                                       self.shown)
            head.update(title)
            info.update(body)

    def _show_pipeline(self, key: str, head: Static, errors: Static, info: Static, sql: Static) -> None:
        pipeline = self.compiled.pipelines.get(key)
        if pipeline is None:
            return
        head.update(pipeline_head(key, pipeline, self.compiled.root))
        if pipeline.errors:
            errors.update(Group(*(error_text(e, self.compiled.root) for e in pipeline.errors)))
            errors.remove_class("hidden")
        info.update(pipeline_info(self.compiled, key, self.app.store.active_for(key), self.shown.get(key, []),
                                  self.fixes.get(key)))
        code = pipeline_code(pipeline, self.app.current_theme.dark, self.shown.get(key, []))
        if code is not None:
            sql.update(code)

    @on(PublishLaunched)
    def _publish_launched(self, message: PublishLaunched) -> None:
        from ratui.screens.run import RunScreen

        self.app.push_screen(RunScreen(batch=message.value.id, origin="pipelines"))
