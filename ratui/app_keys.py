"""The App's keys, all built from console/screen_specs.py (and each mode's class, screens/modes.py): its bindings,
the command palette, the help screen's sections, and the moves they make (open a screen, `:` to a screen, a
pipeline or a run, the theme).

`Navigation` is a mixin of RatuiApp: its methods use the App's compiled project, controller and screens. Textual's
`@on` registers handlers on message-pump classes only, so its handlers go by their names (`on_run_looked_up`).
"""

from __future__ import annotations

import asyncio
import difflib
import re
from functools import partial
from typing import Any, Callable

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ratui.console import screen_specs, user_settings
from ratui.console.format import short_key
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN
from ratui.messages import RunLookedUp, ThemeSaved
from ratui.screens.dialogs import ConfirmScreen, ErrorScreen, HelpScreen, JumpScreen
from ratui.screens.history import HistoryScreen
from ratui.screens.modes import SCREEN_CLASSES
from ratui.screens.quality import QualityScreen
from ratui.screens.run import RunScreen

# what `:` takes for a run id: its time-ordered digits and hex (run ids are 18 characters; a prefix of 6 will do)
RUN_ID_LIKE = re.compile(r"^[0-9]{6}[0-9a-f]{0,12}$")

SCREEN_ALIASES = screen_specs.ALIASES

KEY_NAMES = {
    "plus": "+", "slash": "/", "colon": ":", "question_mark": "?", "escape": "esc", "right_square_bracket": "]",
    "left_square_bracket": "[", "space": "space", "enter": "enter", "backspace": "backspace",
    "equals_sign": "=", "minus": "-",
}


def key_text(binding: Binding) -> str:
    keys = [k.strip() for k in binding.key.split(",")]
    return " / ".join(KEY_NAMES.get(k, k) for k in keys)


# the App's own keys (each screen adds its own): 1-9 and 0 open the screens screen_specs.py declares
APP_BINDINGS = [
    *[Binding(spec.key, f"open('{spec.mode}')", spec.title, id=f"app.{spec.mode}", show=False)
      for spec in screen_specs.SCREENS],
    Binding("w", "toggle_watch", "Watch", id="app.watch"),
    Binding("colon", "jump", "Jump", id="app.jump", key_display=":"),
    Binding("question_mark", "help", "Help", id="app.help", key_display="?"),
    Binding("ctrl+t", "toggle_theme", "Theme", id="app.theme", show=False),
    Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True, show=False),  # in ? and the palette
]


# ------------------------------------------------------------------------------------------ command palette


class ConsoleCommands(Provider):
    """The console's commands: run, cancel, open a screen, the branch moves (new, switch, merge, undo), reload,
    toggle theme."""

    refs: list[str] = []  # main and the user's branches, read (off the event loop) when the palette opens

    async def startup(self) -> None:
        app: Any = self.app
        self.refs = []
        if app.compiled is not None:
            try:
                self.refs = await asyncio.to_thread(app.controller.workable_refs)
            except RatuiError:  # the catalog cannot be read now: the palette offers the rest
                self.refs = []

    def _branch_commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app: Any = self.app
        working = app.controller.ref
        commands: list[tuple[str, str, Callable[[], Any]]] = [
            ("New branch", f"from {working}, named in a dialog (n on Branches)",
             partial(app.branch_action, "new", working)),
            ("Undo the newest action", f"on {working}: shows what it reverses, then asks (z)",
             partial(app.branch_action, "undo", None)),
        ]
        commands += [(f"Switch to {ref}", "the console works on it (s on Branches)",
                      partial(app.branch_action, "switch", ref)) for ref in self.refs if ref != working]
        commands += [(f"Merge {ref}", "into the ref it came from: a dry run first, then asks (m on Branches)",
                      partial(app.branch_action, "merge", ref)) for ref in self.refs if ref != MAIN]
        return commands

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app: Any = self.app  # the RatuiApp (app.py imports this module, never the other way)
        commands: list[tuple[str, str, Callable[[], Any]]] = [
            *[(f"Open {spec.title}", f"{spec.summary} ({spec.key})", partial(app.action_open, spec.mode))
              for spec in screen_specs.SCREENS],
            ("Toggle watch", "run what each file save affects (w)", app.action_toggle_watch),
            ("Toggle Iceberg REST catalog", "serve the branches to DuckDB, PyIceberg, Spark… like `ratui serve` (i "
             "on Branches)", app.action_toggle_serve),
            ("Toggle theme", "switch between dark and light", app.action_toggle_theme),
            ("Engines", "the console's own Spark, and the shell's warm engine: pid, since, memory, commands",
             app.action_engines),
            ("Alerts", "the alert rules and the newest attempts: sent, failed, suppressed (ratui alerts)",
             app.action_alerts),
            ("Reload project", "re-read the project files (ctrl+r on Pipelines)", app.reload_project),
            ("Help: all keys", "every key binding, per screen (?)", app.action_help),
        ]
        compiled = app.compiled
        if compiled is not None:
            commands += self._branch_commands()
            commands.append(("Run all pipelines", "every pipeline in dependency order",
                             partial(app.run_batch, compiled.graph.order(), "all pipelines")))
            for key in compiled.graph.order():
                name = short_key(key, compiled.settings.namespace)
                commands.append((f"Run {name}", key, partial(app.run_pipeline, key)))
                chosen = compiled.graph.order({key, *compiled.graph.descendants(key)})
                if len(chosen) > 1:
                    commands.append((f"Run {name}+ (with descendants)", f"{len(chosen)} pipelines",
                                     partial(app.run_batch, chosen, f"{name}+")))
                commands.append((f"Full refresh {name}", f"rebuild {key} from scratch",
                                 partial(app.run_pipeline, key, True)))
        for run in app.store.active():
            commands.append((f"Cancel run {run.run_id} ({run.pipeline})", "asks for confirmation",
                             partial(app.confirm_cancel, [run.run_id])))
        return commands

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            if name.startswith(("Open", "Toggle", "Reload", "Run all", "Cancel", "Help", "New branch", "Switch",
                                "Merge", "Undo")):
                yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_text)


# ------------------------------------------------------------------------------------------------ moving


class Navigation:
    """Where the keys take the user: a screen, a pipeline on it, a run, the help; and the theme."""

    def open_run(self, run_id: str) -> None:
        self.push_screen(RunScreen(run_id, origin=self.current_mode))

    def open_quality(self, run_id: str) -> None:
        self.push_screen(QualityScreen(run_id, origin=self.current_mode))

    def action_open(self, mode: str) -> None:
        """Show that screen itself (not a run detail left open on top of it)."""
        if self.current_mode != mode:
            self.switch_mode(mode)
        self.call_later(self._to_base)

    def _to_base(self) -> None:
        while len(self.screen_stack) > 1 and not isinstance(self.screen, (ErrorScreen, ConfirmScreen)):
            self.pop_screen()

    def action_jump(self) -> None:
        names = sorted({k.rsplit(".", 1)[1] for k in self.compiled.pipelines}) if self.compiled else []
        self.push_screen(JumpScreen(names), self.jump)

    def jump(self, text: str | None) -> None:
        """`:` — a screen's name (or a unique prefix of it), `run ID` or a run id alone, a pipeline's name
        (name, layer.name or namespace.layer.name, or a unique prefix), help or quit."""
        if not text:
            return
        raw = text.strip().lstrip(":").strip()
        word, _, rest = raw.partition(" ")
        word, rest = word.lower(), rest.strip()
        if word == "run" and rest:
            self.jump_to_run(rest)
            return
        if word in ("help", "keys", "?"):
            self.action_help()
            return
        if word in ("quit", "q!", "exit"):
            self.run_worker(self.action_quit())
            return
        if word not in SCREEN_ALIASES and len(word) >= 2 and not rest:  # a unique prefix: "bra" -> branches
            matches = {mode for alias, mode in SCREEN_ALIASES.items() if alias.startswith(word)}
            if len(matches) == 1:
                word = matches.pop()
        if word in SCREEN_ALIASES and not rest:
            self.action_open(SCREEN_ALIASES[word])
            return
        key = self._pipeline_named(raw)
        if key is not None:
            self.show_pipeline(key)
        elif RUN_ID_LIKE.match(raw):
            self.jump_to_run(raw)
        else:
            near = self.nearest_name(raw)
            self.notify(f"Nothing is called '{raw}'" + (f": did you mean {near}?" if near else ".") + " Type a screen ("
                        + ", ".join(spec.mode for spec in screen_specs.SCREENS)
                        + "), a pipeline's name, a run id, help or quit.",
                        severity="warning", markup=False)

    def nearest_name(self, text: str) -> str | None:
        """The screen or pipeline name closest to a mistyped one (`revnue` -> daily_revenue), or None."""
        names = [spec.mode for spec in screen_specs.SCREENS]
        if self.compiled is not None:
            names += sorted({k.rsplit(".", 1)[1] for k in self.compiled.pipelines})
        text = text.strip().lower().rsplit(".", 1)[-1]
        close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
        return close[0] if close else None

    def _pipeline_named(self, text: str) -> str | None:
        """The pipeline `text` names: its key, layer.name or name, else the one pipeline whose name starts so."""
        if self.compiled is None:
            return None
        text = text.strip().lower()
        keys = list(self.compiled.pipelines)
        for key in keys:
            if text in (key, key.split(".", 1)[1], key.rsplit(".", 1)[1]):
                return key
        starts = [k for k in keys if k.rsplit(".", 1)[1].startswith(text) or k.split(".", 1)[1].startswith(text)]
        return starts[0] if len(starts) == 1 else None

    def show_pipeline(self, key: str, mode: str = "pipelines") -> None:
        """A screen (Pipelines, Lineage, Query) with the pipeline `key` selected: its `select_key(key)`."""
        self.action_open(mode)
        self.call_later(lambda: self.call_later(self._select_pipeline, key, mode))

    def _select_pipeline(self, key: str, mode: str) -> None:
        screen = self.screen
        select = getattr(screen, "select_key", None)
        if getattr(screen, "MODE", None) == mode and select is not None:
            select(key)

    def branch_action(self, what: str, ref: str | None) -> None:
        """The palette's branch moves: Branches, then its own action (new, switch, merge, undo) on `ref`, through
        run_action (a read-only console refuses what changes the project)."""
        self.action_open("branches")
        argument = "" if ref is None else repr(ref)
        self.call_later(lambda: self.call_later(self._on_branches, f"{what}({argument})"))

    async def _on_branches(self, action: str) -> None:
        if getattr(self.screen, "MODE", None) == "branches":
            await self.run_action(f"screen.{action}")

    def jump_to_run(self, run_id: str) -> None:
        """Open a run by id (or a unique prefix), after looking it up: an unknown id says so."""
        self.background(lambda: (run_id, self.controller.get_run(run_id)), RunLookedUp, "looking up the run",
                        group="jump")

    def on_run_looked_up(self, message: RunLookedUp) -> None:
        typed, record = message.value
        if record is None:
            self.notify(f"No run '{typed}' in the history (a run id, or the start of one).", title="Jump",
                        severity="warning", markup=False)
        else:
            self.open_run(record["id"])

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        sections = [("Everywhere", [(key_text(b), b.description) for b in self.BINDINGS]
                     + [("ctrl+p", "Command palette")])]
        screens = [(f"{spec.title} ({spec.key})", SCREEN_CLASSES[spec.mode]) for spec in screen_specs.SCREENS]
        for title, screen in (*screens, ("Run detail", RunScreen),
                              ("History (l on Branches, h on Pipelines)", HistoryScreen)):
            sections.append((title, [(key_text(b), b.description) for b in screen.BINDINGS] + list(screen.HELP_KEYS)))
        return sections

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))

    def get_system_commands(self, screen):
        """Textual's palette commands but its "Theme": the console's own "Toggle theme" is the one (and saved)."""
        for command in super().get_system_commands(screen):  # type: ignore[misc]
            if command.title != "Theme":
                yield command

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"
        word = "light" if self.theme == "textual-light" else "dark"
        self.background(lambda: user_settings.save({"theme": self.theme}), ThemeSaved, "saving the theme",
                        group="theme")
        self.notify(f"Theme: {word}.", title="Theme", timeout=2, markup=False)

    def on_theme_saved(self, message: ThemeSaved) -> None:
        if message.value is None:
            self.notify("The theme applies to this session; it could not be saved in your config folder.",
                        title="Theme", severity="warning", timeout=4, markup=False)
