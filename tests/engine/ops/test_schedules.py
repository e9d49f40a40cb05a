"""Schedules declared and checked (ratui.yaml's schedules, a pipeline's schedule) and the fires they make: fixed
instants, no clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.ops.schedule_fires import due, fires_after, next_fire
from ratui.engine.project.compiler import compile_project
from ratui.engine.project.scaffold import init_project

UTC = timezone.utc
AMS = "Europe/Amsterdam"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


# ----------------------------------------------------------------------------------------------- fires


def test_spring_gap_fires_at_the_next_valid_instant_once():
    # 2026-03-29 in Amsterdam: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day
    fires = fires_after("30 2 * * *", AMS, at("2026-03-28T12:00:00+01:00"), limit=3)
    assert fires == [at("2026-03-29T03:00:00+02:00"), at("2026-03-30T02:30:00+02:00"),
                     at("2026-03-31T02:30:00+02:00")]
    # every half hour: the gap's 02:00 and 02:30 both land on 03:00, which fires once
    fires = fires_after("*/30 * * * *", AMS, at("2026-03-29T01:00:00+01:00"), limit=3)
    assert fires == [at("2026-03-29T01:30:00+01:00"), at("2026-03-29T03:00:00+02:00"),
                     at("2026-03-29T03:30:00+02:00")]


def test_autumn_repeated_hour_fires_once():
    # 2026-10-25 in Amsterdam: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice
    fires = fires_after("30 2 * * *", AMS, at("2026-10-24T12:00:00+02:00"), limit=2)
    assert fires == [at("2026-10-25T02:30:00+02:00"), at("2026-10-26T02:30:00+01:00")]
    fires = fires_after("0 * * * *", AMS, at("2026-10-25T00:30:00+02:00"), limit=4)
    assert fires == [at("2026-10-25T01:00:00+02:00"), at("2026-10-25T02:00:00+02:00"),
                     at("2026-10-25T03:00:00+01:00"), at("2026-10-25T04:00:00+01:00")]


def test_on_time_fire_runs_with_its_time_in_the_reason():
    d = due("nightly", "0 6 * * *", AMS, "last", at("2026-06-01T06:00:00+02:00"), at("2026-06-02T06:00:20+02:00"))
    assert [f.at for f in d.fires] == [at("2026-06-02T06:00:00+02:00")]
    assert d.fires[0].missed == 0 and "catching up" not in d.fires[0].reason
    assert d.next_at == at("2026-06-03T06:00:00+02:00")
    assert d.latest == at("2026-06-02T06:00:00+02:00")


def test_nothing_due_between_fires_and_none_for_a_new_schedule():
    d = due("n", "0 6 * * *", "UTC", "last", at("2026-06-02T06:00:00Z"), at("2026-06-02T12:00:00Z"))
    assert d.fires == [] and d.latest is None and d.next_at == at("2026-06-03T06:00:00Z")
    d = due("n", "0 6 * * *", "UTC", "all", None, at("2026-06-02T12:00:00Z"))
    assert d.fires == [] and d.next_at == at("2026-06-03T06:00:00Z")


def test_catch_up_last_is_one_run_saying_how_many_were_missed():
    d = due("n", "0 * * * *", "UTC", "last", at("2026-06-01T00:00:00Z"), at("2026-06-01T05:30:00Z"))
    assert len(d.fires) == 1 and d.fires[0].at == at("2026-06-01T05:00:00Z")
    assert "catching up 5 missed fire(s)" in d.fires[0].reason and d.fires[0].missed == 4
    assert d.latest == at("2026-06-01T05:00:00Z")


def test_catch_up_all_runs_each_and_none_runs_none_of_the_missed():
    last, now = at("2026-06-01T00:00:00Z"), at("2026-06-01T03:30:00Z")
    d = due("n", "0 * * * *", "UTC", "all", last, now)
    assert [f.at for f in d.fires] == [at(f"2026-06-01T0{h}:00:00Z") for h in (1, 2, 3)]
    d = due("n", "0 * * * *", "UTC", "none", last, now)
    assert d.fires == [] and d.dropped == 3 and d.latest == at("2026-06-01T03:00:00Z")
    # on time: `none` runs the fire that is due now, and drops the missed ones before it
    d = due("n", "0 * * * *", "UTC", "none", last, at("2026-06-01T03:00:05Z"))
    assert [f.at for f in d.fires] == [at("2026-06-01T03:00:00Z")] and d.dropped == 2


def test_clock_jumping_forward_an_hour_follows_the_catch_up_rule():
    last = at("2026-06-01T10:05:00Z")
    d = due("n", "*/5 * * * *", "UTC", "last", last, last + timedelta(hours=1, seconds=3))
    assert len(d.fires) == 1 and d.fires[0].missed == 11
    d = due("n", "*/5 * * * *", "UTC", "last", last, last - timedelta(hours=1))  # backwards: nothing twice
    assert d.fires == []


def test_next_fire_in_a_time_zone():
    assert next_fire("0 6 * * *", "America/New_York", at("2026-01-10T12:00:00Z")) == at("2026-01-11T06:00:00-05:00")


# ----------------------------------------------------------------------------------------------- checks


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return init_project(tmp_path / "p", None)


def _settings(root: Path, text: str) -> None:
    path = root / "ratui.yaml"
    path.write_text(path.read_text() + text)


def _check(root: Path) -> list[RatuiError]:
    return compile_project(root, cache=False).all_errors()


def _refused(root: Path) -> RatuiError:
    with pytest.raises(RatuiError) as caught:
        compile_project(root, cache=False)
    return caught.value


def _lines(root: Path) -> int:
    return len((root / "ratui.yaml").read_text().splitlines())


def test_declared_schedules_compile(project: Path):
    _settings(project, 'schedules:\n  - {name: nightly, select: "silver.signups+", cron: "0 6 * * *", '
                       "timezone: Europe/Amsterdam, catch_up: all}\n")
    signups = next(project.glob("*/pipelines/silver/signups"))
    (signups / "config.yaml").write_text('schedule: {cron: "*/5 * * * *"}\n')
    compiled = compile_project(project, cache=False)
    assert compiled.all_errors() == []
    by_name = {s.name: s for s in compiled.schedules}
    assert by_name["nightly"].catch_up == "all" and by_name["nightly"].timezone == AMS
    key = next(k for k in compiled.pipelines if k.endswith("silver.signups"))
    assert by_name[key].cron == "*/5 * * * *" and by_name[key].timezone == "UTC" and by_name[key].select == key


@pytest.mark.parametrize("cron", ["0 6 * * * *", "garbage", "61 * * * *"])
def test_bad_cron_is_coded_at_its_line(project: Path, cron: str):
    before = _lines(project)
    _settings(project, f'schedules:\n  - name: a\n    select: silver.signups\n    cron: "{cron}"\n')
    error = _refused(project)
    assert (error.code, error.line, Path(error.file).name) == ("RAT-SCH-001", before + 4, "ratui.yaml")


def test_bad_time_zone_and_duplicate_name_are_coded_at_their_line(project: Path):
    before = _lines(project)
    _settings(project, 'schedules:\n  - {name: a, select: silver.signups, cron: "0 6 * * *"}\n'
                       '  - {name: a, select: silver.signups, cron: "0 7 * * *"}\n')
    error = _refused(project)
    assert (error.code, error.line) == ("RAT-SCH-003", before + 3)
    (project / "ratui.yaml").write_text("\n".join((project / "ratui.yaml").read_text().splitlines()[:before])
                                        + '\nschedules:\n  - {name: a, select: silver.signups, cron: "0 6 * * *",'
                                        " timezone: Mars/Base}\n")
    error = _refused(project)
    assert (error.code, error.line) == ("RAT-SCH-002", before + 2)


def test_selector_naming_no_pipeline_is_a_check_error(project: Path):
    before = _lines(project)
    _settings(project, 'schedules:\n  - {name: a, select: silver.signups, cron: "0 6 * * *"}\n'
                       '  - {name: b, select: gold.nothing+, cron: "0 7 * * *"}\n')
    errors = _check(project)
    assert [(e.code, e.line) for e in errors] == [("RAT-SCH-004", before + 3)]


def test_pipeline_schedule_errors_at_the_annotation(project: Path):
    sql = next(project.glob("*/pipelines/silver/signups/pipeline.sql"))
    text = sql.read_text()
    sql.write_text("-- @schedule: 0 6 * * * *\n" + text)
    assert [(e.code, e.line) for e in _check(project)] == [("RAT-SCH-001", 1)]
    sql.write_text("-- @schedule: 0 6 * * *; Europe/Nowhere\n" + text)
    assert [(e.code, e.line) for e in _check(project)] == [("RAT-SCH-002", 1)]
    sql.write_text("-- @schedule: 0 6 * * *; Europe/Paris\n" + text)
    assert _check(project) == []
