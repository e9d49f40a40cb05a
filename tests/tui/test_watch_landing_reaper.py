"""Pilot tests: the watch toggle, the Landing screen (ledger and reset) and the Reaper screen (preview, run now).

No Spark: the watcher's runner is a recorder (the engine's own runs are tested in tests/engine), the ledger is
seeded directly and the reaper removes an orphan branch made by hand.
"""

from __future__ import annotations

import sqlite3
import threading

from ratui.console.controller import Controller
from ratui.engine.state.db import open_db, write_tx
from ratui.engine.state.ledger import Ledger
from ratui.engine.project.settings import load_settings
from ratui.screens.dialogs import ConfirmScreen
from ratui.screens.landing import LandingScreen
from ratui.screens.reaper import ReaperScreen

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .seed import SUCCESS_RUN, seed_history

SIZE = (130, 42)
NS = "ecommerce"
ORDERS = "ecommerce.bronze.raw_orders"


class RecordingWatch(Controller):
    """The real Watcher (watchfiles, debounce, planning), with a runner that records the plans instead of Spark."""

    def __init__(self, root, **kwargs):
        super().__init__(root, **kwargs)
        self.plans: list[list[str]] = []
        self.ran = threading.Event()

    def make_watcher(self, on_event):
        from ratui.engine.watch.watcher import Watcher

        def record(keys):
            self.plans.append(list(keys))
            self.ran.set()
            return []

        return Watcher(self.root, run_keys=record, on_event=on_event, debounce_ms=100)


def test_watch_toggle_shows_its_state_runs_saves_and_reports_broken_files(tmp_path):
    root = copy_sample(tmp_path)
    controller = RecordingWatch(root)
    app = make_app(root, controller=controller, reaper_schedule=False)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert "watch off" in screen_text(app)
            await pilot.press("w")
            await wait_for(pilot, lambda: app.watch_mode == "watching", timeout=15)
            assert "◉ watching" in screen_text(app)
            assert controller.watcher.running

            # a save runs what it affects
            sql = root / NS / "pipelines" / "bronze" / "raw_orders" / "pipeline.sql"
            sql.write_text(sql.read_text() + "\n-- touched\n")
            await wait_for(pilot, lambda: controller.plans, timeout=15)
            assert controller.plans[0][0] == ORDERS

            # a broken file: its coded error as a notification, nothing runs
            cfg = root / NS / "pipelines" / "silver" / "product_catalog" / "pipeline.sql"
            cfg.write_text(cfg.read_text().replace("-- @merge_strategy: full_refresh",
                                                   "-- @merge_strategy: full_refresch"))
            await wait_for(pilot, lambda: any(n.startswith("Watch: broken file: RAT-") for n in app.notices),
                           timeout=15)
            assert len(controller.plans) == 1

            await pilot.press("w")
            await wait_for(pilot, lambda: app.watch_mode == "off", timeout=15)
            assert "watch off" in screen_text(app)
            assert not controller.watcher.running
            await pilot.press("w")  # toggles again
            await wait_for(pilot, lambda: app.watch_mode == "watching", timeout=15)
            assert not app.crashes
        # leaving the app stops the watcher
        assert not controller.watcher.running

    run(go())


def seed_ledger(root):
    settings = load_settings(root)
    ledger = Ledger(settings.db_path, settings.landing_max_attempts)
    zone = root / NS / "landing" / "orders"
    files = sorted(p for p in zone.iterdir() if p.is_file())
    ledger.sync(NS, "orders", ORDERS, files)
    ledger.sync(NS, "customers", "ecommerce.bronze.raw_customers",
                [root / NS / "landing" / "customers" / "customers.csv"])
    with open_db(settings.db_path) as conn, write_tx(conn):
        ledger.mark_loaded(conn, SUCCESS_RUN, [(NS, "orders", ORDERS, "orders_2026_01.csv")])
    for _ in range(3):
        ledger.record_failure([(NS, "orders", ORDERS, "orders_2026_03.csv")], "RAT-RUN-003 quality gate failed")
    return ledger


def test_landing_lists_the_ledger_and_resets_a_file_then_a_zone(tmp_path):
    root = copy_sample(tmp_path)
    ledger = seed_ledger(root)
    app = make_app(root, reaper_schedule=False)

    def state(zone, file):
        return {f.file: f.state for f in ledger.files(NS, zone)}[file]

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("5")
            await settle(pilot)
            assert isinstance(app.screen, LandingScreen)
            text = screen_text(app)
            assert "4 file(s) in 2 zone(s)" in text and "1 loaded" in text and "2 unloaded" in text
            assert "1 skipped" in text
            assert "customers.csv" in text and "orders_2026_03.csv" in text
            assert "✔ loaded" in text and SUCCESS_RUN in text
            assert "✘ skipped" in text and "RAT-RUN-003 quality gate" in text

            # reset the skipped file: select it, u, confirm
            table = app.screen.query_one("#landing-table")
            table.move_cursor(row=table.get_row_index(f"orders\x1f{ORDERS}\x1forders_2026_03.csv"))
            await pilot.press("u")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            assert "orders_2026_03.csv" in flat(screen_text(app))
            await pilot.press("y")
            await settle(pilot)
            assert state("orders", "orders_2026_03.csv") == "unloaded"
            assert state("orders", "orders_2026_01.csv") == "loaded"
            text = screen_text(app)
            assert "skipped" not in text and "3 unloaded" in text

            # reset the whole zone (U): n backs out, y resets
            await pilot.press("U")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            await settle(pilot)
            assert state("orders", "orders_2026_01.csv") == "loaded"
            await pilot.press("U", "y")
            await settle(pilot)
            assert {f.state for f in ledger.files(NS, "orders")} == {"unloaded"}
            assert "✔ loaded" not in screen_text(app)
            assert not app.crashes

    run(go())


def test_landing_shows_a_page_of_a_big_ledger_with_its_counts_and_what_needs_a_look_first(tmp_path):
    """A ledger bigger than the screen's page: the page holds PAGE rows, an unloaded file first, and the counts
    (and the zone reset's row count) are the whole ledger's."""
    from ratui.engine.landing.local import LocalZone
    from ratui.screens.landing import PAGE
    from tests.scale_project import fill_zone

    root = copy_sample(tmp_path)
    settings = load_settings(root)
    ledger = Ledger(settings.db_path, settings.landing_max_attempts)
    files = PAGE + 200
    zone = LocalZone(NS, "orders", fill_zone(tmp_path / "big", files))
    rows = ledger.sync(NS, "orders", ORDERS, zone.list())
    with open_db(settings.db_path) as conn, write_tx(conn):
        ledger.mark_loaded(conn, SUCCESS_RUN, [(NS, "orders", ORDERS, r.file) for r in rows
                                               if r.file != "part-001100.csv"])
    app = make_app(root, reaper_schedule=False)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("5")
            await settle(pilot)
            assert isinstance(app.screen, LandingScreen)
            text = screen_text(app)
            assert f"{files} file(s) in 1 zone(s)" in text and f"{files - 1} loaded" in text
            assert "1 unloaded" in text and f"showing {PAGE:,}" in text
            table = app.screen.query_one("#landing-table")
            assert table.row_count == PAGE
            assert table.get_row_at(0)[1] == "part-001100.csv"  # the one to load, before the loaded ones
            await pilot.press("U")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            assert f"({files} row(s), every pipeline)" in flat(screen_text(app))
            await pilot.press("n")
            assert not app.crashes

    run(go())


def test_reaper_settings_preview_and_run_now_removes_an_orphan_branch(tmp_path):
    from ratui.engine.facade.engine import Engine

    root = copy_sample(tmp_path)
    seed_history(root)
    engine = Engine.open(root)
    branch = f"run-{SUCCESS_RUN}"
    engine.state.catalog.create_branch(branch, run_id=SUCCESS_RUN)
    with sqlite3.connect(engine.settings.db_path) as conn:
        conn.execute("UPDATE catalog_refs SET created_at = ? WHERE name = ?", ("2026-01-01T00:00:00.000000+00:00",
                                                                              branch))
    app = make_app(root, reaper_schedule=False)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("6")
            await settle(pilot)
            assert isinstance(app.screen, ReaperScreen)
            text = screen_text(app)
            assert "orphan_branch_max_age_hours 6" in flat(text) and "interval_minutes 60" in flat(text)
            assert "no passes yet" in text and "schedule: off in this console" in text

            await pilot.press("p")
            await settle(pilot)
            text = screen_text(app)
            assert "orphan branches" in text and branch in text
            assert f"run {SUCCESS_RUN}, created 2026-01-01 00:00:00" in text
            assert "dry run" in text  # the preview is a stored report too
            assert branch in [r.name for r in engine.state.catalog.list_refs()]  # a preview removes nothing

            await pilot.press("x")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await settle(pilot)
            assert branch not in [r.name for r in engine.state.catalog.list_refs()]
            assert any(n.startswith("Reaper: ") and "removed" in n for n in app.notices)
            reports = app.screen.reports
            assert [r.dry_run for r in reports][:2] == [False, True]
            assert reports[0].tasks["orphan_branches"].removed[0]["name"] == branch
            assert app.screen.query_one("#reaper-reports").row_count == 2
            text = screen_text(app)  # the items of the real pass, under a header that says they are gone
            assert "REMOVED" in text and "WOULD REMOVE" not in text and branch in text
            assert not app.crashes

    run(go())


def test_reaper_schedule_runs_only_after_its_interval(tmp_path):
    root = copy_sample(tmp_path)
    default = make_app(root)  # the schedule from ratui.yaml: every 60 minutes, first one an hour from now

    async def check_default():
        async with default.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert default._reaper_timer is not None and default._reaper_timer._interval == 3600
            assert not any(w.name == "reap-scheduled" for w in default.workers)

    run(check_default())

    app = make_app(root, reaper_interval=0.5)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            # the scheduled pass's report (its worker can come and go between two looks at the workers: a pass
            # over a project with nothing to reap takes milliseconds)
            await wait_for(pilot, lambda: any(not r.dry_run for r in app.controller.reaper_reports()), timeout=10,
                           step=0.1)
            await settle(pilot)
            assert not app.crashes

    run(go())


def test_jump_and_palette_list_the_new_screens(tmp_path):
    root = copy_sample(tmp_path)
    app = make_app(root, reaper_schedule=False)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.jump("landing")
            await settle(pilot)
            assert isinstance(app.screen, LandingScreen)
            app.jump("reap")
            await settle(pilot)
            assert isinstance(app.screen, ReaperScreen)
            assert "5 Landing" in screen_text(app) and "6 Reaper" in screen_text(app)
            from ratui.app_keys import ConsoleCommands

            names = [name for name, _, _ in ConsoleCommands(app.screen)._commands()]
            assert {"Open Landing", "Open Reaper", "Toggle watch"} <= set(names)

    run(go())
