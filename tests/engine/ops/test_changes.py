"""Change detection (run types with reasons) and the landing ledger (exactly-once files), on real Spark."""

from __future__ import annotations

import json

import pytest

from ratui.cli import main as cli_main
from ratui.engine.facade.engine import Engine

EVENTS_1 = '{"id": 1, "kind": "view"}\n{"id": 2, "kind": "cart"}\n'
EVENTS_2 = '{"id": 3, "kind": "view"}\n'


def q(engine, sql):
    columns, rows, _ = engine.query(sql)
    return [dict(zip(columns, r)) for r in rows]


def run(engine, *selectors, **kw):
    return {r.pipeline: r for r in engine.run(engine.compile().select(list(selectors)), **kw)}


def commits_on_main(engine):
    return len(engine.state.catalog.log("main", limit=1000))


@pytest.fixture
def project(make_project, spark):
    return make_project({
        "demo/landing/events/events_1.jsonl": EVENTS_1,
        "demo/pipelines/bronze/events/pipeline.sql": (
            "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
            "SELECT id, kind FROM {{ landing_zone('events') }}\n"),
        "demo/pipelines/silver/kinds/pipeline.sql": (
            "SELECT kind, count(*) AS n FROM {{ ref('bronze.events') }} GROUP BY kind\n"),
        "demo/pipelines/bronze/other/pipeline.sql": "SELECT 1 AS id\n",
    })


def test_run_types_and_reasons(project):
    engine = Engine.open(project)
    first = run(engine)
    assert {k: (r.run_type, r.reason) for k, r in first.items()} == {
        "demo.bronze.events": ("rebuild", "first run"),
        "demo.bronze.other": ("rebuild", "first run"),
        "demo.silver.kinds": ("rebuild", "first run"),
    }
    again = run(engine)
    assert all(r.status == "skipped" and r.run_type == "skip" for r in again.values())
    assert again["demo.bronze.events"].reason.startswith("unchanged since run ")

    (project / "demo/landing/events/events_2.jsonl").write_text(EVENTS_2)
    third = run(engine)
    assert (third["demo.bronze.events"].run_type, third["demo.bronze.events"].reason) == \
        ("incremental", "landing files changed: events")
    assert (third["demo.silver.kinds"].run_type, third["demo.silver.kinds"].reason) == \
        ("full", "upstream changed: bronze.events")
    assert third["demo.bronze.other"].run_type == "skip"

    (project / "demo/pipelines/bronze/other/pipeline.sql").write_text("SELECT 2 AS id\n")
    (project / "demo/pipelines/silver/kinds/config.yaml").write_text("description: counts per kind\n")
    fourth = run(engine)
    # a full_refresh pipeline whose definition changed recomputes its table, as its every run does
    assert (fourth["demo.bronze.other"].run_type, fourth["demo.bronze.other"].reason) == \
        ("full", "definition changed: pipeline.sql")
    assert (fourth["demo.silver.kinds"].run_type, fourth["demo.silver.kinds"].reason) == \
        ("full", "definition changed: config.yaml")
    assert fourth["demo.bronze.events"].run_type == "skip"

    record = engine.state.history.get_run(fourth["demo.silver.kinds"].run_id)
    assert (record["run_type"], record["reason"]) == ("full", "definition changed: config.yaml")


def test_a_changed_definition_of_an_incremental_pipeline_is_no_rebuild(project):
    """An append_only pipeline whose SQL changed takes in what is new, with the new SQL: the rows it wrote before
    stay as the old SQL made them. Its run type says so (incremental), and the reason says why it ran."""
    engine = Engine.open(project)
    run(engine)
    (project / "demo/pipelines/bronze/events/pipeline.sql").write_text(
        "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
        "SELECT id, upper(kind) AS kind FROM {{ landing_zone('events') }}\n")
    (project / "demo/landing/events/events_2.jsonl").write_text(EVENTS_2)
    changed = run(engine, "events")["demo.bronze.events"]
    assert (changed.status, changed.run_type, changed.reason) == ("success", "incremental",
                                                                  "definition changed: pipeline.sql")
    assert changed.rows_written == 1  # the new file's row, not the table built again from every file
    assert q(engine, "SELECT id, kind FROM bronze.events ORDER BY id") == [
        {"id": 1, "kind": "view"}, {"id": 2, "kind": "cart"}, {"id": 3, "kind": "VIEW"}]
    assert engine.state.history.get_run(changed.run_id)["run_type"] == "incremental"


def test_skip_creates_no_branch_and_no_snapshot(project):
    engine = Engine.open(project)
    run(engine)
    pointers, commits = engine.state.catalog.table_pointers("main"), commits_on_main(engine)
    created = []
    engine.subscribe(lambda e: created.append(e) if type(e).__name__ == "RunStarted" else None)
    results = run(engine)
    assert all(r.status == "skipped" for r in results.values())
    assert created == []  # no run started: no branch was ever created
    assert engine.state.catalog.table_pointers("main") == pointers and commits_on_main(engine) == commits
    stored = engine.state.history.get_run(results["demo.bronze.other"].run_id)
    assert stored["status"] == "skipped" and stored["branch"] is None


def test_an_unchanged_project_is_recorded_in_one_commit_and_read_without_the_catalog(project):
    """A no-op run decides every unchanged pipeline against one read of main and records them all in one
    transaction, each with its reason and log line; a fresh process does it without opening the catalog."""
    run(Engine.open(project))
    engine = Engine.open(project)  # a new process's engine: nothing open yet
    statements = []
    engine.state.history._conn.set_trace_callback(statements.append)
    results = run(engine)
    engine.state.history._conn.set_trace_callback(None)
    assert {k: r.run_type for k, r in results.items()} == dict.fromkeys(results, "skip") and len(results) == 3
    assert sum(1 for s in statements if s.upper().startswith("BEGIN")) == 1
    assert engine.state._catalog is None  # table pointers and the ref were read from the catalog's rows
    for result in results.values():
        stored = engine.state.history.get_run(result.run_id)
        assert (stored["status"], stored["run_type"], stored["reason"]) == ("skipped", "skip", result.reason)
        assert [line["message"] for line in stored["logs"]] == [f"skipped: {result.reason}"]


def test_force_runs_regardless(project):
    engine = Engine.open(project)
    run(engine)
    forced = run(engine, "other", force=True)["demo.bronze.other"]
    assert forced.status == "success" and forced.run_type == "full"
    assert forced.reason.startswith("forced (unchanged since run")


def test_cli_shows_run_type_and_exits_0_when_unchanged(project, capsys):
    assert cli_main(["run", "--project", str(project)]) == 0
    assert "rebuild: first run" in capsys.readouterr().out
    assert cli_main(["runs", "--project", str(project)]) == 0
    listed = capsys.readouterr().out
    assert "TYPE" in listed and listed.count(" rebuild ") == 3 and "backfill" not in listed
    assert cli_main(["run", "--project", str(project)]) == 0
    out = capsys.readouterr().out
    assert "skip: unchanged since run" in out and "3 unchanged (skipped)" in out
    assert cli_main(["run", "other", "--project", str(project), "--force", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["run_type"] == "full" and obj["reason"].startswith("forced")


def test_new_files_mode_loads_each_file_exactly_once(project):
    engine = Engine.open(project)
    run(engine, "events")
    for _ in range(2):
        assert run(engine, "events", force=True)["demo.bronze.events"].status == "success"
    assert q(engine, "SELECT count(*) AS n FROM bronze.events") == [{"n": 2}]
    (project / "demo/landing/events/events_2.jsonl").write_text(EVENTS_2)
    run(engine, "events")
    run(engine, "events", force=True)
    assert q(engine, "SELECT id FROM bronze.events ORDER BY id") == [{"id": 1}, {"id": 2}, {"id": 3}]
    states = {(f.file, f.state) for f in engine.state.ledger.files("demo", "events")}
    assert states == {("events_1.jsonl", "loaded"), ("events_2.jsonl", "loaded")}


def test_failed_run_leaves_files_unloaded_then_skips_after_max_attempts(project):
    engine = Engine.open(project)
    run(engine, "events")
    tests_dir = project / "demo/pipelines/bronze/events/tests/quality"
    tests_dir.mkdir(parents=True)
    (tests_dir / "no_bad_kind.sql").write_text("SELECT * FROM {{ this }} WHERE kind = 'bad'\n")
    (project / "demo/landing/events/events_bad.jsonl").write_text('{"id": 9, "kind": "bad"}\n')
    for attempt in (1, 2, 3):
        result = run(engine, "events", force=True)["demo.bronze.events"]
        assert result.status == "failed"
        (bad,) = [f for f in engine.state.ledger.files("demo", "events") if f.file == "events_bad.jsonl"]
        assert bad.attempts == attempt and "RAT-RUN-003" in bad.last_error
        assert bad.state == ("unloaded" if attempt < 3 else "skipped")
    # the bad file is left out; a good file arriving later loads
    (project / "demo/landing/events/events_2.jsonl").write_text(EVENTS_2)
    result = run(engine, "events")["demo.bronze.events"]
    assert result.status == "success"
    assert q(engine, "SELECT id FROM bronze.events ORDER BY id") == [{"id": 1}, {"id": 2}, {"id": 3}]
    logs = " ".join(line["message"] for line in engine.state.history.get_run(result.run_id)["logs"])
    assert "1 skipped file(s) left out" in logs

    # reset makes it loadable again (the test still rejects it: one more failed attempt, not skipped yet)
    assert engine.state.ledger.reset("demo", "events", "events_bad.jsonl") == 1
    assert run(engine, "events", force=True)["demo.bronze.events"].status == "failed"
    (bad,) = [f for f in engine.state.ledger.files("demo", "events") if f.file == "events_bad.jsonl"]
    assert (bad.state, bad.attempts) == ("unloaded", 1)


def ledger(engine) -> dict[str, tuple[str, int]]:
    return {f.file: (f.state, f.attempts) for f in engine.state.ledger.files("demo", "events")}


def test_a_template_failure_does_not_count_an_attempt(project):
    engine = Engine.open(project)
    (project / "demo/pipelines/bronze/events/pipeline.sql").write_text(
        "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
        "SELECT id FROM {{ landing_zone('events') }} {{ oops }}\n")
    assert run(engine, "events")["demo.bronze.events"].status == "failed"
    assert {f.attempts for f in engine.state.ledger.files("demo", "events")} <= {0}


def loads_once_more(engine, project) -> None:
    """The zone's file, left loadable, loads on the next run: exactly once (no attempt counted, no row twice)."""
    again = run(engine, "events")["demo.bronze.events"]
    assert again.status == "success" and again.reason in ("first run", "landing files changed: events"), again
    assert ledger(engine) == {"events_1.jsonl": ("loaded", 1)}
    assert q(engine, "SELECT id FROM bronze.events ORDER BY id") == [{"id": 1}, {"id": 2}]


@pytest.mark.parametrize("phase", ["write", "quality"])  # the landing file read, its rows written on the branch
def test_a_cancelled_run_leaves_its_landing_files_loadable(project, phase):
    """A run cancelled after it read its landing files, on the embedded catalog: the ledger keeps the file
    unloaded with no attempt counted (a cancel is not the file's fault), main has no table, and the next run loads
    the file once."""
    from ratui.engine.events import PhaseStarted

    engine = Engine.open(project)
    answers = []

    def cancel_at(event) -> None:  # in the run's thread, as the phase starts: the cancel is in before it ends
        if isinstance(event, PhaseStarted) and event.phase == phase:
            answers.append(engine.cancel(event.run_id))

    unsubscribe = engine.subscribe(cancel_at)
    result = run(engine, "events")["demo.bronze.events"]
    unsubscribe()
    assert answers == ["requested"]
    assert result.status == "cancelled" and result.error["code"] == "RAT-RUN-001", result.error
    assert list(result.phases)[-1] == phase
    assert ledger(engine) == {"events_1.jsonl": ("unloaded", 0)}
    assert "demo.bronze.events" not in engine.state.catalog.table_pointers("main")
    loads_once_more(engine, project)


def test_a_killed_run_leaves_its_landing_files_loadable(project):
    """`ratui run` SIGKILLed after its landing file was read and written on the run's branch (failpoint
    kill:quality): the next start records the run failed (process died), and the ledger still holds the file
    unloaded with no attempt counted; the next run loads it once."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "events", "--project", str(project)],
                          env=dict(os.environ, RATUI_FAILPOINT="kill:quality"), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    engine = Engine.open(project)
    (dead,) = engine.recover()
    assert engine.state.history.get_run(dead)["error_code"] == "RAT-RUN-006"
    assert ledger(engine) == {"events_1.jsonl": ("unloaded", 0)}
    assert "demo.bronze.events" not in engine.state.catalog.table_pointers("main")
    loads_once_more(engine, project)


def test_changed_file_becomes_unloaded_again(project):
    engine = Engine.open(project)
    run(engine, "events")
    path = project / "demo/landing/events/events_1.jsonl"
    path.write_text(EVENTS_1 + '{"id": 4, "kind": "view"}\n')  # longer: changed, whatever its time says
    result = run(engine, "events")["demo.bronze.events"]
    assert result.reason == "landing files changed: events"
    assert q(engine, "SELECT count(*) AS n FROM bronze.events") == [{"n": 5}]  # a new version is a new file


def test_archive_moves_consumed_files_after_merge(make_project, spark):
    root = make_project({
        "demo/landing/orders/a.csv": "id\n1\n",
        "demo/pipelines/bronze/orders/pipeline.sql": (
            "-- @merge_strategy: append_only\n-- @archive_landing_zones: true\n-- @landing_mode: new_files\n"
            "SELECT id FROM {{ landing_zone('orders') }}\n"),
    })
    engine = Engine.open(root)
    result = run(engine)["demo.bronze.orders"]
    assert result.status == "success"
    assert not (root / "demo/landing/orders/a.csv").exists()
    assert (root / f"demo/landing/orders/_processed/{result.run_id}/a.csv").exists()
    # the archived file is never read again; a rerun with nothing new is skipped, a forced one adds nothing
    assert run(engine)["demo.bronze.orders"].run_type == "skip"
    assert run(engine, force=True)["demo.bronze.orders"].status == "success"
    assert q(engine, "SELECT count(*) AS n FROM bronze.orders") == [{"n": 1}]
    (row,) = engine.state.ledger.files("demo", "orders")
    assert row.state == "loaded" and row.archived_to.endswith(f"_processed/{result.run_id}")


def test_failed_run_does_not_archive(make_project, spark):
    root = make_project({
        "demo/landing/orders/a.csv": "id\n1\n",
        "demo/pipelines/bronze/orders/pipeline.sql": (
            "-- @archive_landing_zones: true\nSELECT id FROM {{ landing_zone('orders') }}\n"),
        "demo/pipelines/bronze/orders/tests/quality/never.sql": "SELECT * FROM {{ this }}\n",
    })
    engine = Engine.open(root)
    assert run(engine)["demo.bronze.orders"].status == "failed"
    assert (root / "demo/landing/orders/a.csv").exists()
    assert [f.state for f in engine.state.ledger.files("demo", "orders")] == ["unloaded"]


def test_landing_cli_lists_and_resets(project, capsys):
    engine = Engine.open(project)
    run(engine, "events")
    capsys.readouterr()
    assert cli_main(["landing", "events", "--project", str(project), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["file"], r["state"]) for r in rows] == [("events_1.jsonl", "loaded")]
    assert cli_main(["landing", "reset", "events", "events_1.jsonl", "--project", str(project)]) == 0
    assert "1 ledger entry made loadable again" in capsys.readouterr().out
    assert [f.state for f in engine.state.ledger.files("demo", "events")] == ["unloaded"]
    assert cli_main(["landing", "reset", "nozone", "--project", str(project)]) == 2


def test_landing_commands_address_zones_of_every_namespace(make_project, spark, capsys):
    """A second namespace's zone is listed, reset and forgotten as `namespace.zone`, or as `zone` alone when only
    one namespace has it; a zone two namespaces share needs its namespace (RAT-LND-011 lists both)."""
    newline = "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
    root = make_project({
        "acme/landing/ev/e1.csv": "id\n1\n2\n",
        "acme/landing/shared/s.csv": "id\n7\n",
        "demo/landing/shared/s.csv": "id\n8\n",
        "acme/pipelines/bronze/ev/pipeline.sql": newline + "SELECT id FROM {{ landing_zone('ev') }}\n",
        "acme/pipelines/bronze/sh/pipeline.sql": newline + "SELECT id FROM {{ landing_zone('shared') }}\n",
        "demo/pipelines/bronze/sh/pipeline.sql": newline + "SELECT id FROM {{ landing_zone('shared') }}\n",
    })
    engine = Engine.open(root)
    assert {k: r.status for k, r in run(engine).items()} == {
        "acme.bronze.ev": "success", "acme.bronze.sh": "success", "demo.bronze.sh": "success"}
    capsys.readouterr()

    def cli(*args):
        code = cli_main([*args, "--project", str(root)])
        out, err = capsys.readouterr()
        return code, out, err

    def states(namespace, zone):
        return [f.state for f in engine.state.ledger.files(namespace, zone)]

    code, out, _ = cli("landing")
    assert code == 0 and "acme.ev" in out and "demo.shared" in out and "acme.shared" in out
    for zone in ("ev", "acme.ev"):
        code, out, _ = cli("landing", zone, "--json")
        assert code == 0 and [(r["namespace"], r["file"]) for r in map(json.loads, out.splitlines())] == [
            ("acme", "e1.csv")]
    code, out, _ = cli("landing", "reset", "ev", "e1.csv")
    assert code == 0 and "1 ledger entry made loadable again" in out
    assert states("acme", "ev") == ["unloaded"]
    run(engine, "acme.bronze.ev", force=True)
    assert states("acme", "ev") == ["loaded"]
    code, out, _ = cli("landing", "reset", "acme.ev", "e1.csv", "--pipeline", "acme.bronze.ev")
    assert code == 0 and states("acme", "ev") == ["unloaded"]
    code, _out, err = cli("landing", "reset", "shared")
    assert code == 2 and "RAT-LND-011" in err and "acme.shared, demo.shared" in err
    assert states("acme", "shared") == states("demo", "shared") == ["loaded"]  # nothing reset
    code, out, _ = cli("landing", "reset", "demo.shared")
    assert code == 0 and states("demo", "shared") == ["unloaded"] and states("acme", "shared") == ["loaded"]
    code, _out, _err = cli("landing", "reset", "shared", "--pipeline", "acme.bronze.sh")
    assert code == 0 and states("acme", "shared") == ["unloaded"]
    code, out, _ = cli("landing", "forget", "acme.ev", "e1.csv")
    assert code == 0 and states("acme", "ev") == []


def test_a_file_removed_after_a_failed_load_is_no_reason_to_run(make_project, spark):
    """landing_mode all: the zone folder is the truth. A file that failed its load and was then removed from the
    zone leaves nothing to load: the pipeline is unchanged (not 'landing files to load: bad.jsonl')."""
    root = make_project({
        "demo/landing/events/events_1.jsonl": EVENTS_1,
        "demo/pipelines/bronze/events/pipeline.sql": "SELECT id, kind FROM {{ landing_zone('events') }}\n",
        "demo/pipelines/bronze/events/tests/quality/no_bad.sql": "SELECT * FROM {{ this }} WHERE kind = 'bad'\n",
    })
    engine = Engine.open(root)
    first = run(engine)["demo.bronze.events"]
    (root / "demo/landing/events/bad.jsonl").write_text('{"id": 9, "kind": "bad"}\n')
    failed = run(engine)["demo.bronze.events"]
    assert failed.status == "failed" and failed.reason == "landing files changed: events"
    assert [f.name for f in engine.state.ledger.unloaded("demo", ["events"], "demo.bronze.events")] == ["bad.jsonl"]
    (root / "demo/landing/events/bad.jsonl").unlink()
    again = run(engine)["demo.bronze.events"]
    assert (again.status, again.reason) == ("skipped", f"unchanged since run {first.run_id}")
