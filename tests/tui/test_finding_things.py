"""Finding things at 80 columns (issue 48, item 5): the tab bar's titles whole, a config value whole beside its
origin, the keys each screen has in its footer (Lineage's c, Branches' z and i), the palette's branch moves (new,
switch, merge, undo) and one theme entry, how to leave Query's editor, and `:` naming the nearest name to a typo.
No Spark: the sample project with seeded history, and a branch of the user's made through the engine."""

from __future__ import annotations

import pytest

from ratui.console import screen_specs
from ratui.screens.dialogs import JumpScreen

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .seed import seed_history

SMALL = (80, 24)
LARGE = (160, 48)


@pytest.fixture
def with_dev(tmp_path):
    """The seeded sample with a branch `dev` of the user's (from main)."""
    from ratui.engine.facade.engine import Engine

    root = copy_sample(tmp_path)
    seed_history(root)
    engine = Engine.open(root)
    engine.create_branch("dev")
    engine.close()
    return root


def first_line(app) -> str:
    return screen_text(app).splitlines()[0]


def footer(app) -> str:
    return screen_text(app).splitlines()[-1]


def messages(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


@pytest.mark.parametrize("width", [80, 100])
def test_the_tab_bar_keeps_every_title_whole(seeded, width):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=(width, 24)) as pilot:
            await settle(pilot)
            for mode in ("pipelines", "lineage"):
                app.action_open(mode)
                await settle(pilot)
                line = first_line(app)
                for spec in screen_specs.SCREENS:
                    assert spec.title in line, f"{spec.title!r} cut at {width} columns: {line!r}"
                    assert f"{spec.key}" in line

    run(go())


def test_a_config_value_is_whole_at_80_columns(seeded):
    """gold.daily_revenue's strategy (`full_refresh`) and where it was set, never `full…`."""
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.show_pipeline("ecommerce.gold.daily_revenue")
            await settle(pilot)
            text = screen_text(app)
            assert "Config" in text
            assert "full…" not in text and "full_refresh" in flat(text)

    run(go())


def test_the_footers_name_lineage_columns_undo_and_the_rest_catalog(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.action_open("lineage")
            await settle(pilot)
            assert "c Columns" in footer(app)
            assert "c columns" in screen_text(app).splitlines()[1], "the line above the graph is cut before c"
            app.action_open("branches")
            await settle(pilot)
            assert "z Undo" in footer(app) and "i REST" in footer(app), footer(app)

    run(go())


def palette_hits(app) -> str:
    return flat(screen_text(app))


def test_the_palette_has_the_branch_moves_and_one_theme(with_dev):
    app = make_app(with_dev)

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+p")
            await settle(pilot)
            await pilot.press(*"theme")
            await wait_for(pilot, lambda: "Toggle theme" in palette_hits(app), 10)
            assert palette_hits(app).count("theme") == 1 + 1, "two theme entries (and the typed word)"
            for word, expected in (("undo", "Undo the newest action"), ("new br", "New branch"),
                                   ("merge", "Merge dev"), ("switch", "Switch to dev")):
                for _ in range(8):
                    await pilot.press("backspace")
                await pilot.press(*word)
                await wait_for(pilot, lambda expected=expected: expected in palette_hits(app), 10)
            await pilot.press("enter")  # Switch to dev
            await wait_for(pilot, lambda: app.controller.ref == "dev", 20)
            await settle(pilot)
            assert app.current_mode == "branches"
            assert any("Working on dev" in m for m in messages(app))

    run(go())


def test_the_palette_merge_opens_the_dry_run(with_dev):
    app = make_app(with_dev)

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+p")
            await settle(pilot)
            await pilot.press(*"merge dev")
            await wait_for(pilot, lambda: "Merge dev" in palette_hits(app), 10)
            await pilot.press("enter")
            await wait_for(pilot, lambda: "Dry run of dev into main" in screen_text(app), 20)

    run(go())


def test_query_says_how_to_leave_the_editor(seeded):
    """In the SQL editor `:` is a character: the footer and the line below say esc leaves it; then `:` jumps."""
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.action_open("query")
            await settle(pilot)
            app.screen.query_one("#query-editor").focus()
            await settle(pilot)
            assert "esc Leave editor" in footer(app), footer(app)
            assert "esc leaves the editor" in screen_text(app)
            await pilot.press("escape", "colon")
            await settle(pilot)
            assert isinstance(app.screen, JumpScreen)

    run(go())


def test_jump_to_an_unknown_name_names_the_nearest(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            for typed, near in (("revnue", "daily_revenue"), ("brnches", "branches")):
                await pilot.press("colon", *typed, "enter")
                await settle(pilot)
                assert any(f"Nothing is called '{typed}': did you mean {near}?" in m for m in messages(app)), \
                    messages(app)

    run(go())
