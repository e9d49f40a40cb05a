"""The reaper on a real Nessie server (its runner jar, one per module, emptied between tests) with real Iceberg
tables (PyIceberg, no Spark): the orphan-file sweep marks what every Nessie reference reaches, branches and tags,
those another Nessie client made included; the orphan run branches are found in Nessie's own ref list.

"Another client" is Nessie's REST API v2 called directly with `requests`, never through ratui. File ages are set
with os.utime; a branch's age comes from Nessie's commit times, so the pass that must find it old runs with a clock
hours ahead.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from ratui.engine.ops.reaper import Reaper
from ratui.engine.facade.engine import Engine
from ratui.engine.state.catalog.base import MAIN
from ratui.engine.write.files import table_location
from ratui.engine.run.record import RunRecord


KEY = "demo.bronze.items"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])



@pytest.fixture
def engine(nessie_uri: str, tmp_path: Path) -> Engine:
    """A project whose ratui.yaml points at the Nessie server, with one table on main (ids 0, 1, 2)."""
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import reset

    reset(nessie_uri)
    root = tmp_path / "proj"
    (root / "demo/pipelines/bronze/items").mkdir(parents=True)
    (root / "demo/pipelines/bronze/items/pipeline.sql").write_text("SELECT 1 AS id\n")
    (root / "ratui.yaml").write_text(f"namespace: demo\ncatalog:\n  type: nessie\n  uri: {nessie_uri}\n")
    engine = Engine.open(root)
    assert isinstance(engine.state.catalog, NessieBranchCatalog)
    engine.state.catalog.create_table(MAIN, KEY, SCHEMA, table_location(root, KEY)).append(rows(3))
    engine.state.catalog.record_commit(MAIN, f"create {KEY}")
    return engine


# ------------------------------------------------------------------------------------------------ helpers


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "v": [f"v{i}" for i in range(start, start + n)]},
                    schema=SCHEMA)


def ids_of(table) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def warehouse_files(engine: Engine) -> set[str]:
    return {os.path.realpath(p) for p in (engine.root / "demo/warehouse").rglob("*") if p.is_file()}


def age_tree(folder: Path, hours: float) -> None:
    when = time.time() - hours * 3600
    for path in Path(folder).rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def names(items: list[dict]) -> list[str]:
    return sorted(i["name"] for i in items)


def reachable(engine: Engine, refs: list[str]) -> set[str]:
    """Every file the tables of `refs` reach, through PyIceberg's inspect tables (not the reaper's marker)."""
    out: set[str] = set()
    catalog = engine.state.catalog
    for ref in refs:
        for key in catalog.table_pointers(ref):
            table = catalog.load_table(ref, key)
            out.add(table.metadata_location)
            out.update(e.metadata_file for e in table.metadata.metadata_log)
            out.update(s.manifest_list for s in table.metadata.snapshots)
            out.update(table.inspect.all_manifests().column("path").to_pylist())
            out.update(table.inspect.all_files().column("file_path").to_pylist())
    return {os.path.realpath(p.removeprefix("file://")) for p in out}


# ------------------------------------------------------------------------------------- another Nessie client


def rest_ref(uri: str, name: str) -> dict:
    return requests.get(f"{uri}/trees/{name}", timeout=10).json()["reference"]


def rest_create(uri: str, name: str, kind: str, source: str = MAIN) -> None:
    """A branch or tag at `source`'s head, made through Nessie's REST API (no ratui commit, no ratui property)."""
    src = rest_ref(uri, source)
    requests.post(f"{uri}/trees", params={"name": name, "type": kind},
                  json={"type": src["type"], "name": src["name"], "hash": src["hash"]}, timeout=10).raise_for_status()


def rest_content(uri: str, ref: str, key: str) -> dict:
    return requests.get(f"{uri}/trees/{ref}/contents/{key}", timeout=10).json()["content"]


def rest_put(uri: str, branch: str, key: str, content: dict) -> None:
    """One commit by another client on its branch: the table set to `content` (an Iceberg table state)."""
    head = rest_ref(uri, branch)["hash"]
    body = {"commitMeta": {"message": "nightly etl", "author": "etl-bot"},
            "operations": [{"type": "PUT", "key": {"elements": key.split(".")}, "content": content}]}
    requests.post(f"{uri}/trees/{branch}@{head}/history/commit", json=body, timeout=10).raise_for_status()


def rest_names(uri: str) -> dict[str, str]:
    return {r["name"]: r["type"] for r in requests.get(f"{uri}/trees", timeout=10).json()["references"]}


def written_by(engine: Engine, ref: str, *ids: int) -> set[str]:
    """Appends rows on `ref` through ratui's PyIceberg catalog; returns the files the append wrote."""
    before = warehouse_files(engine)
    engine.state.catalog.load_table(ref, KEY).append(rows(len(ids), ids[0]))
    return warehouse_files(engine) - before


# ------------------------------------------------------------------------------------------------ the tests


def test_sweep_keeps_what_a_foreign_branch_and_a_tag_reach(engine: Engine, nessie_uri: str) -> None:
    catalog, root = engine.state.catalog, engine.root
    main_ids = ids_of(catalog.load_table(MAIN, KEY))
    # a table state another client committed on a branch it made: the files of an append on a scratch branch,
    # which then goes, so that only the other client's branch reaches them
    catalog.create_branch("scratch")
    foreign_files = written_by(engine, "scratch", 100, 101)
    rest_create(nessie_uri, "etl-nightly", "BRANCH")
    rest_put(nessie_uri, "etl-nightly", KEY, rest_content(nessie_uri, "scratch", KEY))
    catalog.delete_branch("scratch")
    # a tag another client made on a branch's state; the branch then goes: only the tag reaches its files
    catalog.create_branch("release-candidate")
    tag_files = written_by(engine, "release-candidate", 200, 201)
    rest_create(nessie_uri, "release-1", "TAG", source="release-candidate")
    catalog.delete_branch("release-candidate")
    assert rest_names(nessie_uri) == {"main": "BRANCH", "etl-nightly": "BRANCH", "release-1": "TAG"}
    tag_head = rest_content(nessie_uri, "release-1", KEY)["metadataLocation"]
    assert (("release-1", KEY, tag_head) in {(p.ref, p.table, p.location) for p in catalog.every_pointer()})
    # what the test stands on: a tag is no branch, and main reaches neither append
    assert not tag_files & reachable(engine, [r.name for r in catalog.list_refs()])
    assert not (foreign_files | tag_files) & reachable(engine, [MAIN])
    assert any(f.endswith(".parquet") for f in foreign_files) and any(f.endswith(".parquet") for f in tag_files)

    table_dir = Path(table_location(root, KEY))
    junk = [table_dir / "data/00000-0-junk.parquet", table_dir / "metadata/99999-junk.metadata.json",
            root / "demo/warehouse/bronze/dropped/data/old.parquet"]
    for path in junk:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)
    age_tree(root / "demo/warehouse", 48)

    dry = engine.reaper().run(dry_run=True)
    assert dry.ok, dry.errors
    assert names(dry.tasks["orphan_files"].found) == sorted(str(p.relative_to(root)) for p in junk)
    assert all(p.exists() for p in junk)

    real = engine.reaper().run()
    assert real.ok, real.errors
    assert names(real.tasks["orphan_files"].removed) == names(dry.tasks["orphan_files"].found)
    assert not any(p.exists() for p in junk)
    assert all(os.path.exists(f) for f in foreign_files | tag_files)
    # both refs still read whole, and main is as it was
    assert ids_of(catalog.load_table("etl-nightly", KEY)) == main_ids + [100, 101]
    tagged = catalog.static_table(rest_content(nessie_uri, "release-1", KEY)["metadataLocation"])
    assert ids_of(tagged) == main_ids + [200, 201]
    assert ids_of(catalog.load_table(MAIN, KEY)) == main_ids
    assert rest_names(nessie_uri) == {"main": "BRANCH", "etl-nightly": "BRANCH", "release-1": "TAG"}


def test_orphan_run_branches_found_in_nessies_ref_list(engine: Engine, nessie_uri: str) -> None:
    catalog, history = engine.state.catalog, engine.state.history
    main_ids = ids_of(catalog.load_table(MAIN, KEY))
    for run_id, status in [("deadrun", "failed"), ("liverun", "running")]:
        RunRecord(history).create(run_id, KEY, "test", "full_refresh", None)
        RunRecord(history).update(run_id, status=status, branch=f"run-{run_id}")
    # "gonerun": a killed run whose row is not in this history at all
    for run_id in ("deadrun", "liverun", "gonerun"):
        catalog.create_branch(f"run-{run_id}", run_id=run_id)
    dead_files = written_by(engine, "run-deadrun", 300, 301)
    catalog.record_commit("run-deadrun", f"wrote {KEY}", {"kind": "run", "run_id": "deadrun"})
    rest_create(nessie_uri, "etl-nightly", "BRANCH")  # another client's branch: never the reaper's to delete

    # the branches are as young as Nessie's commits that created them: none is removed yet
    now = engine.reaper().run(tasks=["orphan_branches"])
    assert now.ok, now.errors
    assert now.tasks["orphan_branches"].found == [] and now.tasks["orphan_branches"].removed == []
    assert set(rest_names(nessie_uri)) == {"main", "etl-nightly", "run-deadrun", "run-liverun", "run-gonerun"}

    later = Reaper(engine.state, clock=lambda: datetime.now(timezone.utc) + timedelta(hours=7))
    report = later.run(tasks=["orphan_branches"])
    assert report.ok, report.errors
    task = report.tasks["orphan_branches"]
    assert names(task.removed) == ["run-deadrun", "run-gonerun"]
    assert {i["name"]: i["reason"] for i in task.kept} == {"run-liverun": "its run is still running"}
    assert rest_names(nessie_uri) == {"main": "BRANCH", "etl-nightly": "BRANCH", "run-liverun": "BRANCH"}

    # what only the deleted run branch reached stays while its deletion is inside the retention window, and is an
    # orphan once the window has passed it: the sweep frees exactly that
    age_tree(engine.root / "demo/warehouse", 48)
    sweep = engine.reaper().run(tasks=["orphan_files"])
    assert sweep.ok and sweep.tasks["orphan_files"].removed == [], sweep.errors
    sweep = Reaper(engine.state, clock=lambda: datetime.now(timezone.utc) + timedelta(days=8)).run(
        tasks=["orphan_files"])
    assert sweep.ok, sweep.errors
    removed = {os.path.realpath(engine.root / i["path"]) for i in sweep.tasks["orphan_files"].removed}
    assert removed == dead_files
    assert ids_of(catalog.load_table(MAIN, KEY)) == main_ids
    assert ids_of(catalog.load_table("etl-nightly", KEY)) == main_ids
    assert all(os.path.exists(f) for f in reachable(engine, [MAIN, "etl-nightly", "run-liverun"]))


def test_a_table_the_project_cannot_read_on_any_ref_stops_the_sweep(engine: Engine, nessie_uri: str,
                                                                     tmp_path: Path) -> None:
    """Another project's table on another client's branch, its metadata outside this project: what it reaches is
    unknown, so the sweep deletes nothing and names the ref and the table."""
    catalog, root = engine.state.catalog, engine.root
    elsewhere = tmp_path / "other-project/warehouse/t/metadata/00000-x.metadata.json"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(Path(catalog.load_table(MAIN, KEY).metadata_location.removeprefix("file://")).read_bytes())
    rest_create(nessie_uri, "other-team", "BRANCH")
    head = rest_ref(nessie_uri, "other-team")["hash"]
    table = {"type": "ICEBERG_TABLE", "metadataLocation": elsewhere.as_uri(), "snapshotId": -1, "schemaId": 0,
             "specId": 0, "sortOrderId": 0}
    namespace = {"type": "NAMESPACE", "elements": ["other"]}
    operations = [{"type": "PUT", "key": {"elements": ["other"]}, "content": namespace},
                  {"type": "PUT", "key": {"elements": ["other", "t"]}, "content": table}]
    requests.post(f"{nessie_uri}/trees/other-team@{head}/history/commit", timeout=10,
                  json={"commitMeta": {"message": "their table"}, "operations": operations}).raise_for_status()
    junk = Path(table_location(root, KEY)) / "data/00000-0-junk.parquet"
    junk.write_bytes(b"x")
    before = warehouse_files(engine)
    age_tree(root / "demo/warehouse", 48)

    report = engine.reaper().run(tasks=["orphan_files"])
    task = report.tasks["orphan_files"]
    assert task.error is not None and task.removed == []
    assert task.error["code"] == "RAT-RPR-002" and "RAT-PTH-002" in task.error["message"]
    assert "other.t on ref 'other-team'" in task.error["message"], task.error
    assert warehouse_files(engine) == before


def test_gc_reclaims_a_dropped_table_and_a_deleted_branch_after_the_window(engine: Engine, nessie_uri: str) -> None:
    """Nessie's own GC keeps a dropped table's files forever (nessie#9097); ratui's sweep frees them, and a deleted
    branch's, once the retention window has passed, never what main or a live branch shares."""
    catalog, root = engine.state.catalog, engine.root
    main_ids = ids_of(catalog.load_table(MAIN, KEY))
    old = "demo.bronze.old_orders"
    before = warehouse_files(engine)
    catalog.create_table(MAIN, old, SCHEMA, table_location(root, old)).append(rows(2))
    catalog.record_commit(MAIN, f"create {old}")
    dropped = warehouse_files(engine) - before
    catalog.restore(MAIN, {old: None}, {old: catalog.table_pointers(MAIN)[old]}, f"drop {old}")
    catalog.create_branch("feature")
    shared = written_by(engine, "feature", 100)
    catalog.record_commit("feature", f"wrote {KEY}")
    catalog.create_branch("follow-up", from_ref="feature")
    own = written_by(engine, "feature", 200)
    catalog.record_commit("feature", f"wrote {KEY}")
    catalog.delete_branch("feature")
    assert [d.name for d in catalog.deleted_refs()] == ["feature"]
    age_tree(root / "demo/warehouse", 48)

    now = engine.reaper().run(tasks=["orphan_files"])  # the drop and the deletion are inside the window
    assert now.ok and now.tasks["orphan_files"].removed == [], now.errors

    later = Reaper(engine.state, clock=lambda: datetime.now(timezone.utc) + timedelta(days=8))
    dry = later.run(dry_run=True, tasks=["orphan_files"])
    assert dry.ok, dry.errors
    found = {os.path.realpath(root / i["path"]): (i["kind"], i.get("table") or i.get("ref"))
             for i in dry.tasks["orphan_files"].found}
    assert found == {**{p: ("dropped_table", old) for p in dropped}, **{p: ("deleted_branch", "feature") for p in own}}
    real = later.run(tasks=["orphan_files"])
    assert real.ok, real.errors
    assert {os.path.realpath(root / i["path"]) for i in real.tasks["orphan_files"].removed} == dropped | own
    assert all(os.path.exists(p) for p in shared)
    assert ids_of(catalog.load_table("follow-up", KEY)) == main_ids + [100]
    assert ids_of(catalog.load_table(MAIN, KEY)) == main_ids
