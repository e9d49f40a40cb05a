"""The branch workflow on real Spark and Iceberg: dev branches, merges that carry the landing ledger, concurrent
refs, atomic publish, history with pipeline versions, rollback, time travel and the reaper around them."""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ratui.cli import main as cli_main
from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.run.record import RunRecord

E1 = '{"id": 1, "kind": "view"}\n{"id": 2, "kind": "cart"}\n'
E2 = '{"id": 3, "kind": "view"}\n'
E3 = '{"id": 4, "kind": "buy"}\n'
EVENTS = "demo.bronze.events"
KINDS = "demo.silver.kinds"


def rows(engine, sql, ref="main"):
    columns, data, _ = engine.query(sql, ref=ref)
    return sorted(tuple(r) for r in data)


def run(engine, *selectors, **kw):
    return {r.pipeline: r for r in engine.run(engine.compile().select(list(selectors)), **kw)}


def states(engine):
    return sorted((f.file, f.pipeline, f.state) for f in engine.landing_files("events"))


def metadata_bytes(engine, ref="main"):
    """Every metadata file the ref points at, with a hash of its bytes."""
    out = {}
    for key, location in engine.table_pointers(ref).items():
        path = location.removeprefix("file://")
        out[key] = (location, hashlib.sha256(Path(path).read_bytes()).hexdigest())
    return out



@pytest.fixture(params=["sqlite", "nessie"])
def catalog(request, tmp_path):
    """The project's catalog: the embedded one, or a real Nessie server (emptied for each test), named in the
    ratui.yaml make_project writes."""
    if request.param == "nessie":
        from tests.conftest import TEST_SETTINGS
        from tests.nessie_server import reset

        uri = request.getfixturevalue("nessie_uri")
        reset(uri)
        root = tmp_path / "proj"
        root.mkdir(parents=True, exist_ok=True)
        (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo") + f"catalog:\n  type: nessie\n  uri: {uri}\n")
    return request.param


@pytest.fixture
def project(make_project, spark, catalog):
    return events_project(make_project)


@pytest.fixture
def embedded_project(make_project, spark):
    """The embedded catalog only: what it alone does (a moved project's tables follow it; on Nessie the tables
    stay in catalog.warehouse, wherever the checkout goes)."""
    return events_project(make_project)


def events_project(make_project):
    return make_project({
        "demo/landing/events/e1.jsonl": E1,
        "demo/pipelines/bronze/events/pipeline.sql": (
            "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
            "SELECT id, kind FROM {{ landing_zone('events') }}\n"),
        "demo/pipelines/silver/kinds/pipeline.sql": (
            "SELECT kind, count(*) AS n FROM {{ ref('bronze.events') }} GROUP BY kind\n"),
    })


def test_a_dev_branch_leaves_main_alone_and_its_merge_carries_the_ledger(project):
    engine = Engine.open(project)
    assert {r.status for r in run(engine).values()} == {"success"}
    main_before = metadata_bytes(engine)

    engine.create_branch("dev")
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    on_dev = run(engine, ref="dev")
    assert {k: (r.status, r.run_type) for k, r in on_dev.items()} == {
        EVENTS: ("success", "incremental"), KINDS: ("success", "full")}
    assert rows(engine, "SELECT id FROM bronze.events", "dev") == [(1,), (2,), (3,)]
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,)]
    assert metadata_bytes(engine) == main_before  # main: the same files, byte for byte
    # the file is loaded on dev only: main would still load it
    assert ("e2.jsonl", EVENTS, "unloaded") in states(engine)
    assert engine.state.ledger.unloaded("demo", ["events"], EVENTS, "dev") == []
    # a second run on dev has nothing to do
    assert {r.status for r in run(engine, ref="dev").values()} == {"skipped"}

    diff = {d.table: d for d in engine.diff_refs("dev")}
    assert set(diff) == {EVENTS, KINDS}
    assert (diff[EVENTS].changed_on, diff[EVENTS].left.rows, diff[EVENTS].right.rows) == ("left", 3, 2)

    dry = engine.merge("dev", dry_run=True)
    assert sorted(dry.tables) == [EVENTS, KINDS] and dry.conflicts == [] and dry.commit is None
    assert metadata_bytes(engine) == main_before

    result = engine.merge("dev")
    assert sorted(result.tables) == [EVENTS, KINDS]
    assert rows(engine, "SELECT kind, n FROM silver.kinds") == [("cart", 1), ("view", 2)]
    assert ("e2.jsonl", EVENTS, "loaded") in states(engine)
    # main holds dev's results now: nothing to run, and no file loaded twice
    again = run(engine)
    assert {r.status for r in again.values()} == {"skipped"}
    assert again[EVENTS].reason == f"unchanged since run {on_dev[EVENTS].run_id}"

    entry = engine.log("main", limit=1)[0]
    assert entry.kind == "merge" and sorted(entry.runs) == sorted(r.run_id for r in on_dev.values())
    made = {t["table"]: (t["run_id"], t["version"], t["rows"]) for t in entry.tables}
    assert made[EVENTS] == (on_dev[EVENTS].run_id, engine.get_run(on_dev[EVENTS].run_id)["version"], 3)


def test_a_merge_conflict_changes_nothing(project):
    engine = Engine.open(project)
    run(engine)
    engine.create_branch("dev")
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    run(engine, ref="dev")
    run(engine)  # main loads e2 too, on its own
    main_before, ledger_before = metadata_bytes(engine), states(engine)

    dry = engine.merge("dev", dry_run=True)
    assert sorted(dry.conflicts) == [EVENTS, KINDS]
    with pytest.raises(RatuiError) as err:
        engine.merge("dev")
    assert err.value.code == "RAT-CAT-003" and sorted(err.value.details["tables"]) == [EVENTS, KINDS]
    assert metadata_bytes(engine) == main_before and states(engine) == ledger_before
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,), (3,)]


def test_runs_on_two_dev_branches_and_main_at_once_do_not_interfere(project):
    engine = Engine.open(project)
    run(engine)
    engine.create_branch("dev1")
    engine.create_branch("dev2")
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    keys = engine.compile().select([])
    invocations = {ref: engine.start(keys, trigger="cli", ref=ref) for ref in ("main", "dev1", "dev2")}
    for ref, invocation in invocations.items():
        assert invocation.wait(240), ref
        assert [(r.pipeline, r.status) for r in invocation.results] == [(EVENTS, "success"), (KINDS, "success")], ref
    for ref in ("main", "dev1", "dev2"):
        # every ref loaded e2 exactly once, and only its own runs wrote there
        assert rows(engine, "SELECT id FROM bronze.events", ref) == [(1,), (2,), (3,)], ref
        assert rows(engine, "SELECT kind, n FROM silver.kinds", ref) == [("cart", 1), ("view", 2)], ref
        ours = {r.run_id for r in invocations[ref].results}
        made = {e.run_id for e in engine.log(ref, limit=2)}
        assert made == ours, ref
        assert engine.state.ledger.unloaded("demo", ["events"], EVENTS, ref) == [], ref
    pointers = [engine.table_pointers(ref)[EVENTS] for ref in ("main", "dev1", "dev2")]
    assert len(set(pointers)) == 3  # three tables of their own, no ref saw another's write


@pytest.fixture
def dag(make_project, spark, catalog):
    """a -> b -> c -> d; c's quality test fails when an event of kind 'bad' arrives."""
    return make_project({
        "demo/landing/events/e1.jsonl": E1,
        "demo/pipelines/bronze/a/pipeline.sql": (
            "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
            "SELECT id, kind FROM {{ landing_zone('events') }}\n"),
        "demo/pipelines/silver/b/pipeline.sql": "SELECT id, upper(kind) AS kind FROM {{ ref('bronze.a') }}\n",
        "demo/pipelines/silver/c/pipeline.sql": "SELECT kind, count(*) AS n FROM {{ ref('silver.b') }} GROUP BY kind\n",
        "demo/pipelines/silver/c/tests/quality/no_bad.sql": "SELECT * FROM {{ this }} WHERE kind = 'BAD'\n",
        "demo/pipelines/gold/d/pipeline.sql": "SELECT sum(n) AS total FROM {{ ref('silver.c') }}\n",
    })


def test_an_atomic_publish_whose_third_of_four_fails_leaves_main_byte_identical(dag):
    engine = Engine.open(dag)
    assert {r.status for r in run(engine).values()} == {"success"}
    (dag / "demo/landing/events/e2.jsonl").write_text('{"id": 9, "kind": "bad"}\n')
    main_before, head_before, ledger_before = metadata_bytes(engine), engine.refs()[0].head, states(engine)
    totals_before = rows(engine, "SELECT total FROM gold.d")

    keys = engine.compile().select([])
    invocation = engine.invocation(keys, trigger="cli", atomic=True)
    results = {r.pipeline: r for r in invocation.run()}
    assert [results[k].status for k in ("demo.bronze.a", "demo.silver.b", "demo.silver.c", "demo.gold.d")] == \
        ["success", "success", "failed", "skipped"]
    assert results["demo.silver.c"].error["code"] == "RAT-RUN-003"
    publish = invocation.publish
    assert not publish.merged and publish.branch.startswith("publish-") and "main unchanged" in publish.reason
    assert metadata_bytes(engine) == main_before and engine.refs()[0].head == head_before
    assert states(engine) == sorted(ledger_before + [("e2.jsonl", "demo.bronze.a", "unloaded")])  # still to load
    assert rows(engine, "SELECT total FROM gold.d") == totals_before
    # the publish branch is kept, with the runs that passed
    assert rows(engine, "SELECT id FROM bronze.a", publish.branch) == [(1,), (2,), (9,)]

    # fixed: the whole DAG lands in one commit
    (dag / "demo/pipelines/silver/c/tests/quality/no_bad.sql").write_text(
        "SELECT * FROM {{ this }} WHERE kind = 'WORSE'\n")
    again = engine.invocation(keys, trigger="cli", atomic=True)
    assert {r.status for r in again.run()} == {"success"}
    assert again.publish.merged and sorted(again.publish.tables) == sorted(keys)
    log = engine.log("main", limit=2)
    assert log[0].kind == "publish" and log[0].hash.startswith(again.publish.commit) and log[1].hash == head_before
    assert rows(engine, "SELECT total FROM gold.d") == [(3,)]
    assert ("e2.jsonl", "demo.bronze.a", "loaded") in states(engine)
    assert again.publish.branch not in {r.name for r in engine.refs()}  # a publish that landed leaves no branch

    # the failed publish's branch goes with the reaper's orphan-branch task once old enough
    later = datetime.now(timezone.utc) + timedelta(hours=7)
    report = engine.reaper(clock=lambda: later).run(tasks=["orphan_branches"])
    assert [i["name"] for i in report.tasks["orphan_branches"].removed] == [publish.branch]
    assert publish.branch not in {r.name for r in engine.refs()}


def test_rollback_then_a_forced_rerun_reproduces_the_rows_and_the_sweep_keeps_history(project, capsys):
    engine = Engine.open(project)
    first = run(engine)
    one = engine.log("main", limit=1)[0]
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    run(engine)
    both = rows(engine, "SELECT id, kind FROM bronze.events")
    two = engine.log("main", limit=1)[0]

    # refused while a run that merges into main is in flight on that table
    RunRecord(engine.state.history).create("inflight", EVENTS, "cli", None, None, ref="main")
    with pytest.raises(RatuiError) as err:
        engine.plan_rollback("main", first[EVENTS].run_id, "events")
    assert err.value.code == "RAT-CAT-011"
    RunRecord(engine.state.history).update("inflight", status="failed")

    assert cli_main(["rollback", "events", "--to", first[EVENTS].run_id, "--dry-run", "--project", str(project)]) == 0
    assert "would roll back" in capsys.readouterr().out and rows(engine, "SELECT id FROM bronze.events") == \
        [(1,), (2,), (3,)]
    assert cli_main(["rollback", "events", "--to", first[EVENTS].run_id, "--project", str(project), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["reloadable_files"] == 1 and [c["table"] for c in done["changes"]] == [EVENTS]
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,)]
    assert ("e2.jsonl", EVENTS, "unloaded") in states(engine)
    entry = engine.log("main", limit=1)[0]
    assert entry.kind == "rollback" and [t["table"] for t in entry.tables] == [EVENTS]
    # a time strictly between the second run's commit and the rollback's (from their own times, not the clock's pace)
    made, rolled = (datetime.fromisoformat(c.created_at) for c in (two, entry))
    assert made < rolled
    between = (made + (rolled - made) / 2).astimezone(timezone.utc).isoformat()
    assert engine.table_pointers("main")[EVENTS] == engine.state.catalog.commit(f"main@{one.hash}").pointers[EVENTS]

    # time travel to before the rollback: by commit and by time (CLI)
    assert rows(engine, "SELECT id FROM bronze.events", f"main@{two.hash[:10]}") == [(1,), (2,), (3,)]
    assert cli_main(["query", "SELECT count(*) AS n FROM bronze.events", "--at", between, "--format", "csv",
                     "--project", str(project)]) == 0
    assert capsys.readouterr().out.splitlines() == ["n", "3"]

    # the reaper, with every file old enough to sweep: nothing a commit inside retention reaches goes
    for path in (project / "demo/warehouse").rglob("*"):
        if path.is_file():
            old = time.time() - 48 * 3600
            os.utime(path, (old, old))
    report = engine.reaper().run(tasks=["orphan_files"])
    assert report.ok, report.to_dict()
    assert rows(engine, "SELECT id FROM bronze.events", f"main@{two.hash}") == [(1,), (2,), (3,)]
    for table in engine.log("main", limit=50):
        for t in table.tables:
            if t["location"]:
                assert Path(t["location"].removeprefix("file://")).is_file()

    # a forced re-run loads the files the rollback made loadable again: the same rows as before it
    rerun = run(engine, force=True)
    assert rerun[EVENTS].status == "success"
    assert rows(engine, "SELECT id, kind FROM bronze.events") == both


def test_log_names_pipeline_versions_and_show_prints_a_runs_sql(project, capsys):
    engine = Engine.open(project)
    first = run(engine)
    sql = project / "demo/pipelines/silver/kinds/pipeline.sql"
    sql.write_text("SELECT kind, count(*) AS n, max(id) AS top FROM {{ ref('bronze.events') }} GROUP BY kind\n")
    second = run(engine)
    assert (second[KINDS].run_type, second[KINDS].reason) == ("full", "definition changed: pipeline.sql")
    versions = [t["version"] for e in engine.log("main", table="kinds") for t in e.tables]
    assert len(versions) == 2 and versions[0] != versions[1]
    assert versions == [engine.get_run(second[KINDS].run_id)["version"], engine.get_run(first[KINDS].run_id)["version"]]
    assert engine.diff_refs("main", f"main@{engine.log('main', table='kinds')[1].hash}")[0].schema_changes == \
        ["+ top long"]  # Iceberg type names

    assert cli_main(["show", first[KINDS].run_id, "--sql", "--project", str(project)]) == 0
    printed = capsys.readouterr().out
    assert "count(*) AS n FROM" in printed and "max(id)" not in printed and "{{" not in printed
    assert cli_main(["log", "kinds", "--project", str(project), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["run_id"] for entry in lines] == [second[KINDS].run_id, first[KINDS].run_id]


def test_a_branch_from_a_past_state_and_its_edges(project):
    engine = Engine.open(project)
    run(engine)
    one = engine.log("main", limit=1)[0]
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    run(engine)

    engine.create_branch("old", from_ref=f"main@{one.hash[:8]}")
    assert rows(engine, "SELECT id FROM bronze.events", "old") == [(1,), (2,)]
    # the branch's ledger is that state's: e2 is still to load there, and a run there loads it
    assert [f.name for f in engine.state.ledger.unloaded("demo", ["events"], EVENTS, "old")] == ["e2.jsonl"]
    assert run(engine, "events", ref="old")[EVENTS].status == "success"
    assert rows(engine, "SELECT id FROM bronze.events", "old") == [(1,), (2,), (3,)]

    for bad, code in ((lambda: engine.create_branch("run-x"), "RAT-CAT-012"),
                      (lambda: engine.create_branch("old"), "RAT-CAT-001"),
                      (lambda: engine.run(["demo.bronze.events"], ref="nope"), "RAT-CAT-002"),
                      (lambda: engine.run(["demo.bronze.events"], ref=f"main@{one.hash}"), "RAT-CAT-007"),
                      (lambda: engine.create_branch("x", from_ref="main@abcdef12"), "RAT-CAT-010"),
                      (lambda: engine.delete_branch("main"), "RAT-CAT-004")):
        with pytest.raises(RatuiError) as err:
            bad()
        assert err.value.code == code
    assert "x" not in {r.name for r in engine.refs()}
    engine.delete_branch("old")
    assert "old" not in {r.name for r in engine.refs()}
    assert engine.state.ledger.unloaded("demo", ["events"], EVENTS, "main") == []


def test_the_branch_commands_end_to_end(project, capsys):
    """branch create / run --ref / diff / merge --dry-run / merge / branch delete through the CLI, as a user types
    them; every step is checked against the catalog."""
    p = ["--project", str(project)]
    engine = Engine.open(project)
    assert cli_main(["run", *p]) == 0
    assert cli_main(["branch", "create", "dev", *p]) == 0
    assert "branch dev created from main (2 table(s))" in capsys.readouterr().out
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    assert cli_main(["run", "--ref", "dev", "--json", *p]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["pipeline"]: r["status"] for r in results} == {EVENTS: "success", KINDS: "success"}
    assert cli_main(["runs", "--ref", "dev", "--json", *p]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["id"] for r in listed) == sorted(r["run_id"] for r in results)
    assert {r["ref"] for r in listed} == {"dev"}

    assert cli_main(["diff", "dev", "--json", *p]) == 0
    diff = {d["table"]: d for d in map(json.loads, capsys.readouterr().out.splitlines())}
    assert (diff[EVENTS]["changed_on"], diff[EVENTS]["left"]["rows"], diff[EVENTS]["right"]["rows"]) == ("left", 3, 2)
    head = engine.state.catalog.get_ref("main").head
    assert cli_main(["merge", "dev", "--dry-run", *p]) == 0
    assert "would merge 2 table(s) of dev into main" in capsys.readouterr().out
    assert engine.state.catalog.get_ref("main").head == head
    assert cli_main(["merge", "dev", "--json", *p]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert sorted(merged["tables"]) == [EVENTS, KINDS] and merged["conflicts"] == []
    assert engine.state.catalog.get_ref("main").head.startswith(merged["commit"])
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,), (3,)]
    assert cli_main(["branch", "delete", "dev", *p]) == 0
    assert [r.name for r in engine.refs()] == ["main"]
    assert cli_main(["merge", "dev", *p]) == 1
    assert "RAT-CAT-002" in capsys.readouterr().err


def test_a_moved_project_still_travels_back_and_rolls_back(embedded_project, tmp_path):
    """Iceberg metadata holds absolute paths: past commits of a moved project read and restore at its new place."""
    import shutil

    project = embedded_project

    engine = Engine.open(project)
    first = run(engine)
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    run(engine)
    (old,) = [e for e in engine.log("main", limit=10) if e.run_id == first[EVENTS].run_id]
    engine.close()
    moved = tmp_path / "elsewhere" / "proj"
    shutil.move(str(project), str(moved))

    engine = Engine.open(moved)
    assert rows(engine, "SELECT id FROM bronze.events", f"main@{old.hash}") == [(1,), (2,)]
    plan = engine.plan_rollback("main", first[EVENTS].run_id, "events")
    assert [(c.before.rows, c.after.rows) for c in plan.changes] == [(3, 2)]
    engine.rollback(plan)
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,)]
    assert run(engine, "events", force=True)[EVENTS].status == "success"
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,), (3,)]
