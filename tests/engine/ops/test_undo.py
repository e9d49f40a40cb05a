"""Undo on real Spark and Iceberg, on both catalogs: a run's merge, a merge, an atomic publish, a rollback, a branch
delete and a landing reset each undone put main (or the branch, or the ledger) back exactly as it was before the
action: the same metadata files byte for byte, the same rows, the same ledger states. Undo walks back newest first;
commits the journal does not know (another writer's) made after an action refuse its undo with RAT-UNDO-002 naming
them, and nothing changes."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from ratui.cli import main as cli_main
from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from tests.engine.ops.test_branches import (  # noqa: F401 - the catalog fixture: both backends
    E2, E3, EVENTS, KINDS, catalog, events_project, metadata_bytes, rows, run, states,
)


@pytest.fixture
def project(make_project, spark, catalog):  # noqa: F811 - the imported fixture
    return events_project(make_project)


def snapshot(engine, ref="main"):
    """What a user relies on of a ref: its metadata files (location and bytes), its rows, and main's ledger."""
    return (metadata_bytes(engine, ref), rows(engine, "SELECT id, kind FROM bronze.events", ref),
            rows(engine, "SELECT kind, n FROM silver.kinds", ref), states(engine))


def refused(engine):
    with pytest.raises(RatuiError) as err:
        engine.plan_undo()
    return err.value


def test_undo_of_a_merge_and_of_an_atomic_publish_restores_main_and_later_commits_refuse(project, capsys):
    p = ["--project", str(project)]
    engine = Engine.open(project)
    assert refused(engine).code == "RAT-UNDO-001"  # nothing done yet
    run(engine)

    # a run's own merge is undone like any merge, newest first: silver.kinds' run, then bronze.events'
    before_runs = snapshot(engine)
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    second = run(engine)
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,), (3,)]
    plan = engine.plan_undo()
    assert (plan.entry.kind, plan.entry.data["run_id"]) == ("run", second[KINDS].run_id)
    assert [t.table for t in plan.tables] == [KINDS] and plan.lines[0].startswith("undo run on main: run ")
    engine.undo(plan)
    plan = engine.plan_undo()
    assert (plan.entry.kind, plan.entry.data["run_id"]) == ("run", second[EVENTS].run_id) and plan.ledger == 1
    engine.undo(plan)
    tables, events, kinds, ledger = snapshot(engine)
    assert (tables, events, kinds) == before_runs[:3]  # the same metadata files, the same rows
    logs = [m["message"] for m in engine.state.history.get_run(second[EVENTS].run_id)["logs"]]
    assert any(m.startswith("its merge into main was undone") for m in logs)  # the run's own log says so
    assert ledger == sorted(before_runs[3] + [("e2.jsonl", EVENTS, "unloaded")])  # loadable again
    assert engine.plan_undo().entry.data["run_id"] != second[EVENTS].run_id  # the first run's merges are next

    engine.create_branch("dev")
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    run(engine, ref="dev")
    before_merge = snapshot(engine)
    merged = engine.merge("dev")
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,), (3,)]
    assert ("e2.jsonl", EVENTS, "loaded") in states(engine)
    after_merge = snapshot(engine)

    # the dry run lists what changes and changes nothing
    assert cli_main(["undo", "--dry-run", *p]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would undo merge on main") and EVENTS in out and "loadable again" in out
    assert snapshot(engine) == after_merge
    assert cli_main(["undo", "--json", *p]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["entry"]["after"] == merged.commit.hash and sorted(done["done"]["tables"]) == sorted(merged.tables)
    assert snapshot(engine) == before_merge  # main's tables, rows and ledger as before the merge
    assert engine.log("main", limit=1)[0].kind == "undo"
    assert engine.plan_undo().entry.kind == "run"  # undos are not undone: the next is older, the runs' merges

    # an atomic publish, undone the same way
    (project / "demo/landing/events/e3.jsonl").write_text(E3)
    before_publish = snapshot(engine)
    invocation = engine.invocation(engine.compile().select([]), trigger="cli", atomic=True)
    assert {r.status for r in invocation.run()} == {"success"} and invocation.publish.merged
    assert rows(engine, "SELECT id FROM bronze.events") != before_publish[1]
    plan = engine.plan_undo()
    assert plan.entry.kind == "publish" and [t.table for t in plan.tables] == sorted(invocation.publish.tables)
    engine.undo(plan)
    tables, events, kinds, ledger = snapshot(engine)
    assert (tables, events, kinds) == before_publish[:3]
    assert ledger == sorted(before_publish[3] + [("e3.jsonl", EVENTS, "unloaded")])  # seen by the publish, unloaded

    # a later commit built on the action: the undo is refused, naming it, and nothing changes
    engine.create_branch("dev2")  # (not dev again: on Nessie its merged head is an ancestor of main's now)
    run(engine, ref="dev2")
    engine.merge("dev2")
    (project / "demo/landing/events/e4.jsonl").write_text('{"id": 5, "kind": "cart"}\n')
    later = run(engine)  # main loads e4 on its own: runs' commits on top of the merge, undone first
    assert later[EVENTS].status == "success"
    assert engine.plan_undo().entry.data["run_id"] == later[KINDS].run_id
    # another writer (an engine through `ratui serve`) appends to main: not in ratui's journal
    table = engine.state.catalog.load_table("main", EVENTS)
    table.append(pa.Table.from_pylist([{"id": 9, "kind": "other"}], schema=table.schema().as_arrow()))
    engine.state.catalog.record_commit("main", f"another writer appended to {EVENTS}")
    state = snapshot(engine)
    err = refused(engine)
    head = engine.state.catalog.get_ref("main").head
    assert err.code == "RAT-UNDO-002" and err.details["commits"][0] == head and head[:12] in err.message
    assert cli_main(["undo", *p]) == 1
    assert "RAT-UNDO-002" in capsys.readouterr().err
    assert cli_main(["undo", "--json", *p]) == 1  # the refusal as JSON names the commits in its details too
    shown = json.loads(capsys.readouterr().out)["error"]
    assert shown["code"] == "RAT-UNDO-002" and shown["details"]["commits"] == err.details["commits"]
    assert snapshot(engine) == state


def test_undo_of_a_rollback_a_branch_delete_and_a_landing_reset(project):
    engine = Engine.open(project)
    first = run(engine)
    (project / "demo/landing/events/e2.jsonl").write_text(E2)
    run(engine)
    before_rollback = snapshot(engine)

    engine.rollback(engine.plan_rollback("main", first[EVENTS].run_id, "events"))
    assert rows(engine, "SELECT id FROM bronze.events") == [(1,), (2,)]
    assert ("e2.jsonl", EVENTS, "unloaded") in states(engine)
    plan = engine.plan_undo()
    assert plan.entry.kind == "rollback" and plan.ledger == 1 and any("loaded again" in line for line in plan.lines)
    engine.undo(plan)
    assert snapshot(engine) == before_rollback  # e2 counts as loaded again: no run loads it twice

    # a branch delete: the branch comes back at its head, with its tables and its ledger loads
    engine.create_branch("dev")
    dev = engine.state.catalog.get_ref("dev")
    dev_before = snapshot(engine, "dev")
    engine.delete_branch("dev")
    plan = engine.plan_undo()
    assert plan.entry.kind == "delete" and plan.lines[0].startswith("undo delete: branch dev comes back")
    engine.undo(plan)
    back = engine.state.catalog.get_ref("dev")
    assert (back.head, back.fork_hash) == (dev.head, dev.fork_hash)
    assert snapshot(engine, "dev") == dev_before
    assert engine.state.ledger.unloaded("demo", ["events"], EVENTS, "dev") == []  # its loads came back too
    assert engine.diff("dev") == []  # a merge base like before: nothing to merge

    # a landing reset: the rows get their states back
    engine.landing_reset("events")
    assert {s for _, _, s in states(engine)} == {"unloaded"}
    engine.undo(engine.plan_undo())
    assert snapshot(engine) == before_rollback

    # reset again, and a run loads the files again: z walks back, the run's merge first (the table as before it,
    # its files loadable again), then the reset (the files loaded, as before it)
    engine.landing_reset("events", pipeline=EVENTS)
    again = run(engine, "bronze.events")
    assert rows(engine, "SELECT id, kind FROM bronze.events") != before_rollback[1]  # every file loaded once more
    plan = engine.plan_undo()
    assert (plan.entry.kind, plan.entry.data["run_id"]) == ("run", again[EVENTS].run_id)
    engine.undo(plan)
    assert {s for _, _, s in states(engine)} == {"unloaded"}
    plan = engine.plan_undo()
    assert plan.entry.kind == "landing_reset"
    engine.undo(plan)
    assert snapshot(engine) == before_rollback


def test_an_undo_whose_branch_is_gone_or_whose_journal_moved_on_is_refused_with_rat_undo_003(tmp_path):
    """What an undo needs is gone: the journal moved on between the plan and its apply (another action came in
    between), or the branch the action changed was deleted by another writer (not through the journal). Both are
    RAT-UNDO-003 and change nothing. No Spark: the tables are written with PyIceberg, the merge is the catalog's."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "ratui.yaml").write_text("namespace: demo\n")
    engine = Engine.open(root)
    cat = engine.state.catalog
    key = "demo.silver.orders"
    cat.create_table("main", key, pa.schema([("id", pa.int64())]), cat.table_location(key)) \
        .append(pa.table({"id": [1]}))
    cat.record_commit("main", f"write {key}")
    engine.create_branch("release")
    engine.create_branch("stage")
    cat.load_table("stage", key).append(pa.table({"id": [2]}))
    cat.record_commit("stage", f"write {key} on stage")
    engine.merge("stage", into="release")  # an action of the journal, on release

    planned = engine.plan_undo()
    assert (planned.entry.kind, planned.entry.ref) == ("merge", "release")
    release = cat.commit("release")
    engine.delete_branch("stage")  # another action, newer: the plan is stale
    with pytest.raises(RatuiError) as stale:
        engine.undo(planned)
    assert stale.value.code == "RAT-UNDO-003" and "the journal changed since the undo was planned" in \
        stale.value.message
    assert (cat.commit("release").hash, cat.commit("release").pointers) == (release.hash, release.pointers)

    engine.undo(engine.plan_undo())  # the delete undone: stage is back, and the merge is the newest action again
    assert "stage" in [r.name for r in cat.list_refs()]
    cat.delete_branch("release")  # by another writer: the journal knows nothing of it
    main = cat.commit("main")
    gone = refused(engine)
    assert gone.code == "RAT-UNDO-003" and "branch release is gone" in gone.message
    assert (cat.commit("main").hash, cat.commit("main").pointers) == (main.hash, main.pointers)
    assert "release" not in [r.name for r in cat.list_refs()]
