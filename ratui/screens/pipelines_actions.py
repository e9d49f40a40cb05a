"""What the keys on the Pipelines screen start, on the selection (a pipeline, a layer or a namespace): run it (with
what is downstream, forced, or from scratch), cancel its runs, edit its file, show its table, its history or its
graph, publish it atomically, open its latest run, reload the project.

`PipelineActions` is a mixin of PipelinesScreen: it reads the screen's compiled project, its selection and the
runs it has read (`recent`); what it starts goes through the App (runs, screens) or a worker (publish)."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any

from textual.app import SuspendNotSupported

from ratui.console.format import short_key
from ratui.engine.errors import error_text
from ratui.messages import PublishLaunched
from ratui.screens.base import changes


class PipelineActions:
    """The Pipelines screen's actions (its bindings name them)."""

    compiled: Any
    selected: tuple | None
    recent: dict[str, list[dict[str, Any]]]
    app: Any

    NEEDS_COMPILE = frozenset({"run", "run_descendants", "run_all", "full_refresh", "force_run", "cancel", "edit",
                               "graph", "table", "history", "publish", "open_run"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the tree is the last compile's outline, what needs the compiled project is shown disabled."""
        if action in self.NEEDS_COMPILE and self.compiled is None:
            return None
        return True

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
            self.notify(f"{len(problems)} problem(s) in the selection: nothing was published.\n"
                        + error_text(first.code, first.message, first.hint), title=f"Cannot publish {label}",
                        severity="error",
                        timeout=12, markup=False)
            return
        ref = self.app.controller.ref
        self.notify(f"Publishing {label} on {ref}: {len(keys)} pipeline(s) on a publish branch; {ref} moves once, "
                    "only if all pass.", title="Atomic publish", timeout=4, markup=False)
        self.load(PublishLaunched, self.app.controller.start_batch, keys, atomic=True)

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
