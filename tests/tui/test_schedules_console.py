"""The Schedules screen (0; issue 50): every schedule with its next fire (UTC and its own zone), its last fire and
what it did, paused or enabled; the runner's lease above them; `p` pauses and resumes, persisted as `ratui schedule
pause|resume` does (what `ratui schedules --json` then says); a read-only console refuses it; enter lists a schedule's
recent fires; a project without schedules says how to declare one. Snapshots at 80x24 and 120x40.

Real state: the sample project with two schedules in its ratui.yaml, the state database (pause, fires recorded, the
lease) written through the Engine, the console's clock frozen (FIXED_NOW, 2026-03-01 12:00 UTC). No Spark.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from textual.widgets import DataTable

from ratui.cli.main import main
from ratui.engine.facade.engine import Engine
from ratui.screens.schedules import FiresScreen

from .conftest import copy_sample, make_app, run, screen_text, settle, wait_for
from .test_snapshots import SMALL, SIZE, snap

UTC = timezone.utc
SCHEDULES = """
schedules:
  - {name: nightly, select: "gold.daily_revenue+", cron: "0 6 * * *", timezone: Europe/Amsterdam}
  - {name: hourly-orders, select: "silver.clean_orders", cron: "5 * * * *", catch_up: none}
"""


def with_schedules(parent: Path) -> Path:
    """The sample with `nightly` (Amsterdam, enabled) and `hourly-orders` (UTC, paused), and two fires of nightly
    recorded by a runner that has since let its lease go."""
    root = copy_sample(parent)
    with open(root / "ratui.yaml", "a", encoding="utf-8") as fh:
        fh.write(SCHEDULES)
    engine = Engine.open(root)
    try:
        engine.pause_schedule("hourly-orders")
        assert engine.take_runner_lease("earlier-runner", 60)[0]
        first, second = datetime(2026, 2, 28, 5, tzinfo=UTC), datetime(2026, 3, 1, 5, tzinfo=UTC)
        assert engine.record_schedule_fires("earlier-runner", "nightly", None, first, [
            (first, "run", "schedule nightly: fire of 2026-02-28 06:00 CET", "260228050000aa11bb")])
        assert engine.record_schedule_fires("earlier-runner", "nightly", first.isoformat(), second, [
            (second, "skipped", "schedule nightly: fire of 2026-03-01 06:00 CET: skipped, its previous run is still "
                                "going", None)])
        engine.release_runner_lease("earlier-runner")
    finally:
        engine.close()
    return root


@pytest.fixture
def project(tmp_path) -> Path:
    return with_schedules(tmp_path)


def listed(root: Path) -> dict[str, dict]:
    """What `ratui schedules --json` says, per schedule (another process, as from a shell)."""
    proc = subprocess.run([sys.executable, "-m", "ratui", "schedules", "--project", str(root), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {row["name"]: row for row in json.loads(proc.stdout.strip().splitlines()[-1])["schedules"]}


def states(root: Path) -> dict[str, dict]:
    engine = Engine.open(root)
    try:
        return engine.schedule_states()
    finally:
        engine.close()


def row_line(app, name: str) -> str:
    return next(line for line in screen_text(app).splitlines() if f" {name} " in line)


def test_both_schedules_show_with_next_fire_last_fire_and_state(project):
    app = make_app(project)

    async def go():
        async with app.run_test(size=(200, 30)) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            assert app.current_mode == "schedules"
            nightly = row_line(app, "nightly")
            # next fire after 2026-03-01 12:00 UTC: 06:00 in Amsterdam is 05:00 UTC (CET)
            assert "2026-03-02 05:00  06:00 CET" in nightly, nightly
            assert "enabled" in nightly and "0 6 * * * · Europe/Amsterdam" in nightly and "last" in nightly
            # its last fire and what it did, with why
            assert "2026-03-01 05:00" in nightly and "skipped: its previous run is still going" in nightly, nightly
            hourly = row_line(app, "hourly-orders")
            assert "paused" in hourly and "2026-03-01 12:05  12:05 UTC" in hourly, hourly
            assert "never fired" in hourly and "none" in hourly
            text = screen_text(app)
            assert "no runner holds the lease" in text and "`ratui up`" in text, text

    run(go())


def test_a_fire_on_another_day_in_its_zone_says_so():
    """Beside the UTC time, the zone's: its day when that is not the UTC one."""
    from ratui.console.schedules import zone_text

    assert zone_text(datetime(2026, 3, 1, 23, 30, tzinfo=UTC), "Europe/Amsterdam") == "00:30 CET +1d"
    assert zone_text(datetime(2026, 3, 1, 2, 0, tzinfo=UTC), "America/New_York") == "21:00 EST -1d"
    assert zone_text(datetime(2026, 7, 1, 5, 0, tzinfo=UTC), "Europe/Amsterdam") == "07:00 CEST"


def test_p_pauses_and_resumes_persisted(project):
    app = make_app(project)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            assert app.screen.cursor_key() == "nightly"
            assert states(project).get("nightly", {}).get("paused") in (None, 0)
            await pilot.press("p")
            await settle(pilot)
            assert listed(project)["nightly"]["paused"] is True  # persisted: the shell sees it
            assert "⏸ paused" in row_line(app, "nightly")
            assert any("Schedule nightly paused" in n for n in app.notices), list(app.notices)
            await pilot.press("p")
            await settle(pilot)
            assert states(project)["nightly"]["paused"] == 0
            assert "● enabled" in row_line(app, "nightly")
            # the paused one resumes the same way
            await pilot.press("down", "p")
            await settle(pilot)
            assert states(project)["hourly-orders"]["paused"] == 0

    run(go())


def test_a_pause_from_the_shell_shows_without_being_asked(project):
    app = make_app(project)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            await wait_for(pilot, lambda: app.controller.follower is not None, 20)
            assert "enabled" in row_line(app, "nightly")
            assert main(["schedule", "pause", "nightly", "--project", str(project)]) == 0
            # the state database's commit is followed: well before the screen's own refresh (30 s)
            await wait_for(pilot, lambda: "paused" in row_line(app, "nightly"), timeout=10)

    run(go())


def test_a_read_only_console_refuses_p(project):
    app = make_app(project, read_only=True)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            await pilot.press("p")
            await settle(pilot)
            assert any("RAT-ACC-001" in n and "pausing or resuming a schedule" in n for n in app.notices), \
                list(app.notices)
            assert "enabled" in row_line(app, "nightly")
        # and the controller refuses it too, whatever path reaches it
        from ratui.engine.errors import RatuiError

        with pytest.raises(RatuiError) as refused:
            app.controller.pause_schedule("nightly", True)
        assert refused.value.code == "RAT-ACC-001"

    run(go())
    assert states(project).get("nightly", {}).get("paused") in (None, 0)


def test_the_lease_line_names_its_holder(project):
    engine = Engine.open(project)
    held, lease = engine.take_runner_lease("a-runner", 600)
    assert held
    engine.close()
    app = make_app(project)

    async def go():
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            text = screen_text(app)
            until = datetime.fromtimestamp(lease.expires, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            assert f"runner: pid {os.getpid()} on {socket.gethostname()} holds the lease until {until}" in text, text

    run(go())


def test_enter_lists_the_recent_fires(project):
    app = make_app(project)

    async def go():
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, FiresScreen)
            assert "Recent fires of nightly" in screen_text(app)
            table = app.screen.query_one("#fires-table", DataTable)
            newest, oldest = ([str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count))
            # newest first: when (UTC and its zone), what it did, the invocation its runs carry, why
            assert newest == ["2026-03-01 05:00", "2026-03-01 06:00 CET", "skipped", "-",
                              "skipped, its previous run is still going"]
            assert oldest == ["2026-02-28 05:00", "2026-02-28 06:00 CET", "run", "260228050000aa11bb", "on time"]
            await pilot.press("escape")
            await settle(pilot)
            assert app.current_mode == "schedules" and not isinstance(app.screen, FiresScreen)

    run(go())


def test_no_schedules_says_how_to_declare_one(tmp_path):
    app = make_app(copy_sample(tmp_path))

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            await pilot.press("0")
            await settle(pilot)
            text = screen_text(app)
            assert "No schedules in this project" in text and "schedules:" in text, text
            assert "docs/concepts/schedules.md" in text.replace("\n", "")
            assert "SCHEDULE " not in text  # no empty table's header

    run(go())


@pytest.mark.parametrize("size", [SMALL, SIZE], ids=["80x24", "large"])
def test_schedules_snapshot(snap_compare, tmp_path, size):
    assert snap(snap_compare, make_app(with_schedules(tmp_path)), ("0",), size=size)


def test_fires_snapshot(snap_compare, tmp_path):
    assert snap(snap_compare, make_app(with_schedules(tmp_path)), ("0",), ("enter",))
