"""The frame every screen shares: the screen tabs at the top and the status line above the footer."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ratui.console import screen_specs, shell_engine

SPARK_TEXT = {
    "idle": ("○", "Spark not started (starts on the first run)", "dim"),
    "starting": ("◌", "Spark starting…", "yellow"),
    "ready": ("●", "Spark ready", "green"),
    "failed": ("✘", "Spark failed to start (see .ratui/logs/)", "red"),
}


# the watch toggle (w): the app's `watch_mode`, which follows the Watcher's state
WATCH_TEXT = {
    "off": ("○", "watch off", "dim"),
    "starting": ("◌", "watch starting…", "yellow"),
    "watching": ("◉", "watching", "green"),
    "pending": ("◉", "watch: changes pending", "yellow"),
    "running": ("◉", "watch: running plan", "cyan"),
    "stopping": ("◌", "watch stopping…", "yellow"),
}


class NavBar(Static):
    """`1 Pipelines  2 Runs  3 Quality  ...  9 Logs  0 Schedules` with the current one lit, the project on the right.
    When that does not fit, every title stays whole: closer together without the `ratui` badge (104 columns), then
    each key glued to its title in colour (`1Pipelines 2Runs 3Quality`: 88 columns), then the tabs glued too, each
    key a coloured block that parts them (`1Pipelines2Runs3Quality`: 78 columns). Never a title cut to `Qua`."""

    def __init__(self, current: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.current = current

    def on_mount(self) -> None:
        self.watch(self.app, "project_name", lambda _: self.refresh(), init=False)

    def render(self) -> Text:
        text = self._tabs()
        if text.cell_len > self.size.width:
            text = self._tight_tabs(spaced=True)
        if text.cell_len > self.size.width:
            text = self._tight_tabs(spaced=False)
        if text.cell_len > self.size.width:
            text = self._glued_tabs()
        project = getattr(self.app, "project_name", "")
        if project and text.cell_len + len(project) + 2 <= self.size.width:
            pad = max(1, self.size.width - text.cell_len - len(project) - 1)
            text.append(" " * pad)
            text.append(project, style="bold")
        return text

    def _tabs(self) -> Text:
        text = Text(" ratui ", style="bold reverse")
        text.append("  ")
        for spec in screen_specs.SCREENS:
            if spec.mode == self.current:
                text.append(f" {spec.key} {spec.title} ", style="bold reverse")
            else:
                text.append(f" {spec.key} ", style="dim")
                text.append(f"{spec.title} ")
            text.append(" ")
        return text

    def _glued_tabs(self) -> Text:
        text = Text(" ")
        for spec in screen_specs.SCREENS:
            if spec.mode == self.current:
                text.append(f"{spec.key} {spec.title}", style="bold reverse")
            else:
                text.append(spec.key, style="bold reverse cyan")
                text.append(spec.title)
        return text

    def _tight_tabs(self, spaced: bool) -> Text:
        text = Text(" ")
        for spec in screen_specs.SCREENS:
            if spec.mode == self.current:
                text.append(f"{spec.key} {spec.title}", style="bold reverse")
            else:
                text.append(spec.key + (" " if spaced else ""), style="bold cyan")
                text.append(spec.title)
            text.append("  " if spaced else " ")
        return text


class StatusLine(Static):
    """Spark's state, the watch toggle's state, the runs in flight, the REST catalog when served, and the shell's
    warm engine (the process that runs `ratui run` from a shell: up and what it holds, or off), always visible,
    just above the footer; where the console's own Spark runs on the right when there is room. What does not fit
    says less (Spark's hint, the engine's pid and memory, then "in flight") before where Spark runs is cut."""

    def on_mount(self) -> None:
        for name in ("spark_state", "spark_where", "active_runs", "watch_mode", "serving", "shell_engine"):
            self.watch(self.app, name, lambda _: self.refresh(), init=False)

    def render(self) -> Text:
        app = self.app
        state = getattr(app, "spark_state", "idle")
        icon, label, style = SPARK_TEXT.get(state, SPARK_TEXT["idle"])
        spark_forms = [(f"{icon} {label}", style), (f"{icon} {label.split(' (', 1)[0]}", style)]
        now = app.now().timestamp() if hasattr(app, "now") else 0.0
        engine_forms = shell_engine.line_forms(getattr(app, "shell_engine", None), now) or [None]
        where = getattr(app, "spark_where", "") if state != "idle" else ""
        where_forms = [f"console's own: {where}", where] if where else [""]
        width = self.size.width
        for engine in engine_forms:
            for spark in spark_forms:
                text = self._line(spark, engine)
                for shown in where_forms:
                    if text.cell_len + (3 + len(shown) if shown else 0) <= width:
                        return self._right(text, shown)
        text = self._line(spark_forms[-1], engine_forms[-1], brief=True)  # the least; where Spark runs, cut
        room = width - text.cell_len - 4
        if where and room >= 12:
            return self._right(text, where if len(where) <= room else where[:room - 1] + "…")
        return text

    def _right(self, text: Text, where: str) -> Text:
        if where:
            text.append(" " * (self.size.width - text.cell_len - len(where) - 1))
            text.append(where, style="dim")
        return text

    def _line(self, spark: tuple[str, str], engine: tuple[str, str] | None, brief: bool = False) -> Text:
        app = self.app
        text = Text(" ")
        text.append(*spark)
        icon, label, style = WATCH_TEXT.get(getattr(app, "watch_mode", "off"), WATCH_TEXT["off"])
        text.append("   ")
        text.append(f"{icon} {label}", style=style)
        active = getattr(app, "active_runs", 0)
        text.append("   ")
        flight = "" if brief else " in flight"
        if active:
            text.append(f"● {active} run{'s' if active != 1 else ''}{flight}", style="cyan")
        else:
            text.append(f"no runs{flight}", style="dim")
        serving = getattr(app, "serving", "")
        if serving:  # the REST catalog: its port only (the URL and token are in its dialog)
            text.append("   ")
            if serving in ("starting", "stopping"):
                text.append(f"◌ REST {serving}…", style="yellow")
            else:
                text.append(f"⇄ REST :{serving.rsplit(':', 1)[-1].split('/', 1)[0]}", style="green")
        if getattr(app, "read_only", False):
            text.append("   ")
            text.append("read-only", style="bold yellow")
        if engine is not None:
            text.append("   ")
            text.append(*engine)
        return text
