"""The console as a new user meets it at 80x24 (issue 48): every section of Run detail and Quality reachable by
keyboard, and the palette's "Maximize" gives a pane the whole screen. No Spark: the sample project with seeded
history (a run with phases, quality results and a data diff)."""

from __future__ import annotations

import pytest

from ratui.console import screen_specs
from ratui.engine.run.record import RunRecord
from ratui.engine.state.history import History

from .conftest import copy_sample, make_app, run, screen_text, settle
from .seed import SUCCESS_RUN, seed_history
from .test_data_diff_console import NEWER, seed_diffs

SMALL = (80, 24)
LARGE = (160, 48)


@pytest.fixture(scope="module")
def detailed(tmp_path_factory):
    """The sample with its seeded history, and NEWER: a failed run of silver.clean_orders with quality results and a
    data diff (all of Run detail's sections)."""
    root = copy_sample(tmp_path_factory.mktemp("detailed"))
    seed_history(root)
    seed_diffs(root)
    history = History(root / ".ratui" / "ratui.db")
    for index, (test, status, violations) in enumerate((("positive_amounts", "failed", 3),
                                                        ("not_null_keys", "passed", 0),
                                                        ("unique_order_id", "passed", 0))):
        RunRecord(history).add_quality(NEWER, {
            "test": test, "severity": "error", "status": status, "violations": violations,
            "duration_ms": 200 + index, "columns": ["order_id"], "sample": [[17]] if violations else [],
            "sql": "SELECT * FROM `ecommerce__silver__clean_orders` WHERE amount <= 0", "error": None,
            "file": str(root / f"ecommerce/pipelines/silver/clean_orders/tests/quality/{test}.sql"),
            "finished_at": "2026-03-01T12:30:09.000Z"})
    history.close()
    return root


def lines(app) -> list[str]:
    return screen_text(app).splitlines()


def row_of(app, text: str) -> int | None:
    return next((i for i, line in enumerate(lines(app)) if text in line), None)


def test_run_detail_every_section_by_keyboard_at_80x24(detailed):
    """The sections pane has the keys first: End shows the whole data diff, Home the phases again, PageDown walks
    through the quality results; tab gives the log the room; m maximizes the focused pane and esc puts it back."""
    app = make_app(detailed)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.open_run(NEWER)
            await settle(pilot)
            screen = app.screen
            assert row_of(app, "Phases") is not None and row_of(app, "3 write") is not None
            await pilot.press("end")
            await settle(pilot)
            assert row_of(app, "changed: order_id=88") is not None, screen_text(app)  # the diff's last line
            await pilot.press("home")
            await settle(pilot)
            assert row_of(app, "0 branch") is not None
            # PageDown walks through every section: each part of each comes into view on the way
            parts = ("Phases", "5 resolve", "Quality", "positive_amounts", "not_null_keys", "unique_order_id",
                     "Data diff", "12,010 -> 12,300 rows", "+300 added", "email", "amount", "changed: order_id=88")
            seen: set[str] = set()
            for _ in range(12):
                seen |= {part for part in parts if row_of(app, part) is not None}
                await pilot.press("pagedown")
                await settle(pilot, rounds=1)
            assert seen == set(parts), set(parts) - seen
            # tab: the log has the keys and the room; the sections keep a few lines
            await pilot.press("tab")
            await settle(pilot)
            assert screen.query_one("#run-right").has_focus_within
            assert screen.query_one("#run-log").size.height > screen.query_one("#run-left").size.height
            assert row_of(app, "tab: the phases, quality and data diff") is not None
            await pilot.press("tab")
            await settle(pilot)
            assert screen.query_one("#run-left").has_focus_within
            # m: the focused pane takes the whole screen (the run's head is gone); esc gives it back
            await pilot.press("m")
            await settle(pilot)
            assert screen.maximized is screen.query_one("#run-left")
            assert row_of(app, "rows written") is None and screen.query_one("#run-left").size.height >= 20
            await pilot.press("escape")
            await settle(pilot)
            assert screen.maximized is None and app.screen is screen
            assert not app.crashes

    run(go())


def test_run_detail_has_no_blank_lines_above_the_phases(detailed):
    """A run without an error: its head, then the phases (no empty error block, no padding at 80x24)."""
    app = make_app(detailed)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.open_run(SUCCESS_RUN)
            await settle(pilot)
            assert row_of(app, "rows written") == 3, screen_text(app)  # the tabs, the pipeline, run/strategy/trigger
            head_end = row_of(app, "type full")  # what the run did and why it ran
            assert head_end == 4, screen_text(app)
            assert row_of(app, "Phases") == head_end + 1, screen_text(app)

    run(go())


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "large"])
def test_run_detail_head_names_the_branch_with_the_tab_titles_whole(detailed, size):
    """The branch a run wrote on is in Run detail's head at every size, on one line with its strategy and trigger
    (at 80 columns the branch's name, run-ID, stands for the run's id too), and the tab bar keeps every title."""
    app = make_app(detailed)

    async def go():
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            app.open_run(SUCCESS_RUN)
            await settle(pilot)
            head = lines(app)[row_of(app, "strategy full_refresh")]
            assert f"branch run-{SUCCESS_RUN}" in head and "trigger console" in head, screen_text(app)
            assert (f"run {SUCCESS_RUN}" in head) is (size == LARGE)  # beside the branch where there is room
            tabs = lines(app)[0]
            assert all(spec.title in tabs for spec in screen_specs.SCREENS), tabs

    run(go())


def test_the_palette_maximizes_the_focused_pane(detailed):
    app = make_app(detailed)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.open_run(NEWER)
            await settle(pilot)
            screen = app.screen
            await pilot.press("ctrl+p", *"maximize")
            await settle(pilot)
            await pilot.pause(0.5)  # the palette searches in its own task
            assert "Maximize" in screen_text(app)
            await pilot.press("enter")
            await settle(pilot)
            assert screen.maximized is screen.query_one("#run-left")

    run(go())


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_quality_sql_is_the_file_and_in_view(detailed, size):
    """`s` shows the test as its file says it (`{{ this }}`, not the compiled table name the run recorded), right
    under the result and on screen; tab gives the result's pane the keys and End reaches its sample rows."""
    app = make_app(detailed)

    async def go():
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            app.open_quality(NEWER)
            await settle(pilot)
            await pilot.press("s")
            await settle(pilot)
            text = screen_text(app)
            assert "FROM {{ this }}" in text, text
            assert "ecommerce__silver__clean_orders" not in text
            assert row_of(app, "positive_amounts.sql, as the file says now") is not None
            assert row_of(app, "s: hide the SQL") is not None
            await pilot.press("tab")
            await settle(pilot)
            assert app.screen.query_one("#quality-detail").has_focus
            await pilot.press("end")
            await settle(pilot)
            assert row_of(app, "Sample violating rows (1 of 3)") is not None, screen_text(app)

    run(go())
