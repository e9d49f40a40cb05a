"""The screens are declared once (console/screen_specs.py SCREENS) and offered everywhere a user looks for one: the
App's modes (a class with that MODE), the number keys, the tab bar, the help, the command palette and the `:` jump
box. A ScreenSpec added without its wiring fails here, naming the place it is missing from. No Spark: the sample
project with seeded history."""

from __future__ import annotations

from typing import Any, Callable

from textual.widgets import Input

from ratui.app_keys import ConsoleCommands
from ratui.console import screen_specs
from ratui.console.screen_specs import ScreenSpec
from ratui.screens.dialogs import JumpScreen
from ratui.screens.modes import SCREEN_CLASSES

from .conftest import make_app, run, screen_text, settle

SIZE = (150, 40)  # wide enough for every tab's full title

# a screen nobody wired: what the check must report in every place
UNWIRED = ScreenSpec("sensors", "s", "Sensors", "file and object-store sensors", ("sense",))


async def offered(app: Any) -> dict[str, Callable[[ScreenSpec], bool]]:
    """Per place a user finds a screen, whether it offers that spec: read from what the running App built and
    shows, never from the specs themselves."""
    bindings = {(b.key, b.action) for b in app.BINDINGS}
    tabs = screen_text(app).splitlines()[0]
    help_sections = dict(app.help_sections())
    palette = {hit.text: hit.help async for hit in ConsoleCommands(app.screen).discover()}
    jump = JumpScreen([]).names

    def has_class(spec: ScreenSpec) -> bool:
        cls = SCREEN_CLASSES.get(spec.mode)
        return cls is not None and cls.MODE == spec.mode and app.MODES.get(spec.mode) is cls

    def in_help(spec: ScreenSpec) -> bool:
        keys = help_sections.get(f"{spec.title} ({spec.key})")
        cls = SCREEN_CLASSES.get(spec.mode)
        return keys is not None and cls is not None and [d for _, d in keys][:len(cls.BINDINGS)] == \
            [b.description for b in cls.BINDINGS]

    return {
        "a screen class with its MODE (screens/modes.py) among the App's modes": has_class,
        "its number key": lambda spec: (spec.key, f"open('{spec.mode}')") in bindings,
        "the tab bar": lambda spec: f" {spec.key} {spec.title} " in tabs,
        "the help": in_help,
        "the command palette": lambda spec: palette.get(f"Open {spec.title}") == f"{spec.summary} ({spec.key})",
        "the `:` jump box": lambda spec: spec.mode in jump,
    }


def unwired(places: dict[str, Callable[[ScreenSpec], bool]], specs) -> list[str]:
    return [f"{spec.mode}: {place}" for spec in specs for place, has in places.items() if not has(spec)]


def test_every_screen_spec_is_wired_everywhere(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            places = await offered(app)
            assert unwired(places, screen_specs.SCREENS) == []
            # the check can fail: a spec declared nowhere else is reported in every place
            assert unwired(places, [UNWIRED]) == [f"sensors: {place}" for place in places]
            # one key and one mode per screen, the keys in the order of the tabs (as on a keyboard: 1-9, then 0)
            keys = [spec.key for spec in screen_specs.SCREENS]
            assert keys == [str(n % 10) for n in range(1, len(keys) + 1)]
            assert len({spec.mode for spec in screen_specs.SCREENS}) == len(keys)
            assert list(app.MODES) == [spec.mode for spec in screen_specs.SCREENS]

    run(go())


def test_the_jump_box_suggests_every_screen(seeded):
    """`:` and the start of a screen's name: the box suggests the screen (→ takes it), enter opens it."""
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            for spec in screen_specs.SCREENS:
                start = "runs" if spec.mode == "pipelines" else "pipelines"  # from another screen (whose keys : opens)
                app.action_open(start)
                await settle(pilot)
                assert app.current_mode == start
                await pilot.press("colon")
                await settle(pilot)
                assert isinstance(app.screen, JumpScreen)
                field = app.screen.query_one(Input)
                await pilot.press(*spec.mode[:-1])
                await settle(pilot)
                await pilot.press("right")  # takes the suggestion
                await settle(pilot)
                assert field.value == spec.mode, f"`:{spec.mode[:-1]}` suggested '{field.value}', not {spec.mode}"
                await pilot.press("enter")
                await settle(pilot)
                assert app.current_mode == spec.mode
            for word in ("help", "quit"):  # and as before, help and quit
                await pilot.press("colon", *word[:-1])
                await settle(pilot)
                await pilot.press("right")
                await settle(pilot)
                assert app.screen.query_one(Input).value == word
                await pilot.press("escape")
                await settle(pilot)

    run(go())
