"""`ratui schedules [--json]`, `ratui schedule pause|resume NAME` and the state behind them (paused, last fire, the
runner's lease, fires recorded before they run): real SQLite, no Spark, no clock of ours."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ratui.cli.main import main
from ratui.engine.facade.engine import Engine
from ratui.engine.project.scaffold import init_project
from ratui.engine.state.schedule_state import ScheduleState

UTC = timezone.utc


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "p", None)
    with open(root / "ratui.yaml", "a") as fh:
        fh.write('schedules:\n  - {name: nightly, select: "silver.signups+", cron: "0 6 * * *", '
                 "timezone: Europe/Amsterdam}\n")
    return root


def _json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1])


def test_schedules_lists_next_fire_in_utc_and_local(project: Path, capsys):
    code, listed = _json(capsys, "schedules", "--project", str(project), "--json")
    assert code == 0
    (row,) = listed["schedules"]
    assert (row["name"], row["select"], row["cron"], row["timezone"]) == ("nightly", "silver.signups+", "0 6 * * *",
                                                                          "Europe/Amsterdam")
    local = datetime.fromisoformat(row["next_fire_local"])
    assert (local.hour, local.minute) == (6, 0)
    assert datetime.fromisoformat(row["next_fire_utc"]) == local
    assert datetime.fromisoformat(row["next_fire_utc"]) > datetime.now(UTC)
    assert row["paused"] is False and row["last_fire"] is None and row["lease_holder"] is None


def test_pause_and_resume_are_persisted(project: Path, capsys):
    assert main(["schedule", "pause", "nightly", "--project", str(project)]) == 0
    capsys.readouterr()
    # another process reads it from the state database
    proc = subprocess.run([sys.executable, "-m", "ratui", "schedules", "--project", str(project), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout)["schedules"][0]["paused"] is True
    assert main(["schedule", "resume", "nightly", "--project", str(project)]) == 0
    capsys.readouterr()
    _, listed = _json(capsys, "schedules", "--project", str(project), "--json")
    assert listed["schedules"][0]["paused"] is False


def test_unknown_schedule_is_coded(project: Path, capsys):
    code, answer = _json(capsys, "schedule", "pause", "nightlyy", "--project", str(project), "--json")
    assert code == 2
    assert answer["error"]["code"] == "RAT-SCH-005" and "nightly" in answer["error"]["hint"]


def test_listing_names_the_lease_holder(project: Path, capsys):
    engine = Engine.open(project)
    held, lease = engine.take_runner_lease("runner-a", 30)
    assert held
    _, listed = _json(capsys, "schedules", "--project", str(project), "--json")
    holder = listed["schedules"][0]["lease_holder"]
    assert holder["pid"] == lease.pid and holder["host"] == lease.host


def test_lease_is_taken_only_when_free_or_expired(tmp_path: Path):
    state = ScheduleState(tmp_path / "ratui.db")
    now = time.time()
    assert state.take_lease("a", 10, now=now)[0]
    held, lease = state.take_lease("b", 10, now=now + 5)
    assert not held and lease.holder == "a"
    assert state.take_lease("a", 10, now=now + 5)[0]  # renewed: now until now + 15
    assert not state.take_lease("b", 10, now=now + 14)[0]
    held, lease = state.take_lease("b", 10, now=now + 15.5)
    assert held and lease.holder == "b"


def test_a_fire_is_recorded_once_and_only_by_the_lease_holder(tmp_path: Path):
    state = ScheduleState(tmp_path / "ratui.db")
    from ratui.engine.state.schedule_state import FireRow

    now = time.time()
    state.baseline("n", "2026-06-01T05:00:00+00:00")
    fire = [FireRow("n", "2026-06-01T06:00:00+00:00", "run", "fire", "inv1")]
    state.take_lease("a", 10, now=now)
    assert not state.record_fires("b", "n", "2026-06-01T05:00:00+00:00", "2026-06-01T06:00:00+00:00", fire, now=now)
    assert state.record_fires("a", "n", "2026-06-01T05:00:00+00:00", "2026-06-01T06:00:00+00:00", fire, now=now)
    # decided from the old last fire again (a restart, a second runner): refused, nothing twice
    assert not state.record_fires("a", "n", "2026-06-01T05:00:00+00:00", "2026-06-01T06:00:00+00:00", fire, now=now)
    assert [f["invocation"] for f in state.fires("n")] == ["inv1"]
    assert state.states()["n"]["last_fire"] == "2026-06-01T06:00:00+00:00"
    assert not state.record_fires("a", "n", "2026-06-01T06:00:00+00:00", "2026-06-01T07:00:00+00:00", fire,
                                  now=now + 11)  # its lease expired
