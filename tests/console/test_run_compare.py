"""console/compare.py: two runs of one pipeline side by side, from the records the history returns."""

from __future__ import annotations

import pytest

from ratui.console.compare import SAME, WORSE, CompareError, compare, load, previous_run
from ratui.console.controller import RunFilter, RunsPage
from ratui.engine.state.history import History
from ratui.engine.run.record import RunRecord

KEY = "shop.silver.orders"


def record_runs(tmp_path) -> History:
    """Two runs of one pipeline the way the runner records them (the run record's update with phases, phase states,
    the write's outcome, inputs), with quality results, and a run of another pipeline."""
    history = History(tmp_path / "ratui.db")
    record = RunRecord(history)
    record.create("r1", KEY, "cli", "incremental", None)
    record.update("r1", status="success", started_at="2026-03-01T10:00:00.000Z", duration_ms=4000,
                  rows_written=120, warnings=1,
                  phases={"branch": 20, "config": 10, "build": 2000, "write": 1500, "quality": 400,
                          "resolve": 70},
                  phase_status={p: "done" for p in ("branch", "config", "build", "write", "quality", "resolve")},
                  write={"strategy": "incremental", "rows_written": 120, "files_added": 2, "files_removed": 1,
                         "files_rewritten": 1, "files_kept": 5, "table_rows": 1000, "created": False,
                         "schema_changes": [], "notes": []},
                  inputs={"tables": {"shop.bronze.raw_orders": "meta/00003.json"},
                          "zones": {"orders": [["a.csv", 10, 1], ["b.csv", 20, 2]]}})
    record.create("r2", KEY, "console", "incremental", None)
    record.update("r2", status="failed", started_at="2026-03-01T10:05:00.000Z", duration_ms=6500,
                  rows_written=0, warnings=0, error_code="RAT-RUN-003",
                  phases={"branch": 25, "config": 10, "build": 3100, "write": 2900, "quality": 465},
                  phase_status={"branch": "done", "config": "done", "build": "done", "write": "done",
                                "quality": "failed"},
                  write={"strategy": "incremental", "rows_written": 300, "files_added": 3, "files_removed": 0,
                         "files_rewritten": 0, "files_kept": 6, "table_rows": 1300, "created": False,
                         "schema_changes": ["add discount decimal(10,2)", "widen qty int -> bigint"],
                         "notes": []})
    record.create("x1", "shop.gold.revenue", "cli", "full_refresh", None)
    record.update("x1", status="success", started_at="2026-03-01T10:06:00.000Z", duration_ms=100)
    for run_id, test, status, violations in (("r1", "positive_amounts", "passed", 0),
                                             ("r1", "late_updates", "warned", 4),
                                             ("r2", "positive_amounts", "failed", 3),
                                             ("r2", "late_updates", "warned", 9),
                                             ("r2", "unique_ids", "passed", 0)):
        record.add_quality(run_id, {"test": test, "severity": "error" if test != "late_updates" else "warn",
                                    "status": status, "violations": violations, "duration_ms": 10})
    return history


def rows(comparison, section):
    return {r.label: r for r in comparison.section(section).rows}


def test_two_runs_side_by_side(tmp_path):
    history = record_runs(tmp_path)
    newer, older = history.get_run("r2"), history.get_run("r1")
    c = compare(newer, older)  # either order: the older is A
    assert c.a["id"] == "r1" and c.b["id"] == "r2" and c.pipeline == KEY

    run = rows(c, "Run")
    assert (run["duration"].a, run["duration"].b) == ("4.00s", "6.50s")
    assert run["duration"].change == "+2.50s (+62%)" and run["duration"].tone == WORSE
    assert (run["outcome"].a, run["outcome"].b, run["outcome"].tone) == ("warned", "failed", WORSE)
    assert run["started (UTC)"].change == "5m later"

    phases = rows(c, "Phases")
    assert list(phases) == ["0 branch", "1 config", "2 build", "3 write", "4 quality", "5 resolve"]
    assert (phases["2 build"].a, phases["2 build"].b, phases["2 build"].change) == ("2.00s", "3.10s", "+1.10s (+55%)")
    assert phases["1 config"].change == "same" and phases["1 config"].tone == SAME
    assert phases["0 branch"].change == "+5 ms (+25%)"  # below a second in ms, not "+0.01s"
    assert phases["4 quality"].b == "0.47s failed"  # a phase that did not end done says how it ended
    assert phases["5 resolve"].b == "not run"

    write = rows(c, "Write")
    assert (write["rows written"].a, write["rows written"].b, write["rows written"].change) == ("120", "300", "+180")
    assert (write["files added"].a, write["files added"].b) == ("2", "3")
    assert (write["files removed"].a, write["files removed"].b, write["files removed"].change) == ("1", "0", "−1")
    assert (write["table rows after"].a, write["table rows after"].b) == ("1,000", "1,300")

    schema = rows(c, "Schema changes")
    assert {k: (r.a, r.b) for k, r in schema.items()} == {"add discount decimal(10,2)": ("no", "yes"),
                                                          "widen qty int -> bigint": ("no", "yes")}

    quality = rows(c, "Quality")
    assert list(quality)[0] == "positive_amounts [error]"  # the worst first
    assert (quality["positive_amounts [error]"].a, quality["positive_amounts [error]"].b) == ("passed", "failed (3)")
    assert quality["positive_amounts [error]"].tone == WORSE
    assert quality["late_updates [warn]"].change == "+5" and quality["late_updates [warn]"].tone == WORSE
    assert (quality["unique_ids [error]"].a, quality["unique_ids [error]"].change) == ("-", "new")

    inputs = rows(c, "Inputs")  # recorded for successful runs only
    assert inputs["landing orders (files)"].a == "2" and inputs["landing orders (files)"].b == "-"
    assert any("successful runs only" in m and "r2" in m for m in c.missing)
    assert any("schema itself" in m for m in c.missing)


def test_what_the_history_does_not_hold_is_said(tmp_path):
    history = History(tmp_path / "ratui.db")
    record = RunRecord(history)
    for run_id, started in (("s1", "2026-03-01T09:00:00.000Z"), ("s2", "2026-03-01T09:10:00.000Z")):
        record.create(run_id, KEY, "cli", "full_refresh", None)
        # an older record: phases without their states, no write outcome
        record.update(run_id, status="success", started_at=started, duration_ms=1000, rows_written=5,
                      phases={"branch": 10, "build": 900})
    c = compare(history.get_run("s1"), history.get_run("s2"))
    assert rows(c, "Phases")["2 build"].b == "0.90s"
    assert c.section("Write").rows == [] and "neither run recorded a write" in c.section("Write").note
    assert any("phase states" in m for m in c.missing)
    assert any("files added / removed" in m for m in c.missing)
    assert "no quality results" in c.section("Quality").note


def test_runs_of_two_pipelines_or_an_unknown_run_are_refused(tmp_path):
    history = record_runs(tmp_path)
    with pytest.raises(CompareError, match="different pipelines"):
        compare(history.get_run("r1"), history.get_run("x1"))
    with pytest.raises(CompareError, match="no run 'nope'"):
        load(history.get_run, "r1", "nope")
    assert load(history.get_run, "r2", "r1").b["id"] == "r2"


def test_the_previous_run_of_the_same_pipeline(tmp_path):
    history = record_runs(tmp_path)
    record = RunRecord(history)
    # a pipeline whose name contains the other's (the runs filter matches by substring)
    record.create("y1", KEY + "_v2", "cli", "full_refresh", None)
    record.update("y1", status="success", started_at="2026-03-01T10:04:00.000Z")

    def runs_page(page, size, flt):
        total = history.count_runs(pipeline=flt.pipeline)
        return RunsPage(history.list_runs(size, page * size, pipeline=flt.pipeline), total, page, size)

    def prev(run_id, size=200):
        return previous_run(runs_page, history.get_run(run_id), lambda p: RunFilter(pipeline=p), page_size=size)

    assert prev("r2")["id"] == "r1"
    assert prev("r2", size=1)["id"] == "r1"  # across pages
    assert prev("r1") is None  # the first run of its pipeline
    assert prev("y1") is None
