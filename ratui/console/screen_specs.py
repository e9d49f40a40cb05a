"""The console's screens, declared once: mode, number key, title, what it is for, the words `:` takes for it.
The App builds its modes, the number keys (1-9, then 0), the palette's "Open ..." commands, the help's sections and
the jump's aliases from these; the `:` jump box suggests their modes; the tab bar shows their keys and titles. No
Textual here (the screen classes are matched to these by their MODE).

Adding a screen: a ScreenSpec line here and its class (with MODE set) in screens/modes.py;
tests/tui/test_screen_specs.py fails until every place offers it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScreenSpec:
    mode: str
    key: str
    title: str
    summary: str  # what the screen is for (the palette)
    aliases: tuple[str, ...] = ()  # other words `:` takes (the mode, its key and unique prefixes always work)


SCREENS = (
    ScreenSpec("pipelines", "1", "Pipelines", "the project tree and pipeline detail", ("pipeline", "p")),
    ScreenSpec("runs", "2", "Runs", "the run history", ("history", "r")),
    ScreenSpec("quality", "3", "Quality", "quality results across recent runs", ("q",)),
    ScreenSpec("branches", "4", "Branches", "refs, diffs, merge and delete", ("branch", "refs", "b")),
    ScreenSpec("landing", "5", "Landing", "the landing-file ledger, reset", ("ledger", "files", "l")),
    ScreenSpec("reaper", "6", "Reaper", "cleanup: settings, reports, preview, run now", ("cleanup", "gc")),
    ScreenSpec("query", "7", "Query", "SQL over a ref's tables, paged results, export", ("sql",)),
    ScreenSpec("lineage", "8", "Lineage", "the project's DAG as a graph", ("graph", "dag")),
    ScreenSpec("logs", "9", "Logs", "Spark's log with a level filter, search", ("log", "spark")),
    ScreenSpec("schedules", "0", "Schedules", "the schedules: next and last fire, pause, the runner's lease",
               ("schedule", "sched", "cron")),
)
BY_MODE = {spec.mode: spec for spec in SCREENS}
ALIASES = {word: spec.mode for spec in SCREENS for word in (spec.mode, *spec.aliases, spec.key)}
