"""Tables in an s3:// warehouse (catalog.warehouse: s3://bucket/prefix), against moto's server on 127.0.0.1: the
reaper's sweep and snapshot expiry (PyIceberg writes, no Spark), and every merge strategy, merge-on-read,
compaction, rollback and queries through the Engine in this process (the session's Spark carries Hadoop's S3A
connector, tests/conftest.py; each run's and query's session gets the bucket's settings). The command line on S3
is tested where it is what is checked: test_s3_warehouse.py (a Spark without the connector) and the Spark
Connect and cluster tests (tests/engine/spark/).

moto keeps an object's LastModified as the time it was written: ages come from the reaper's clock, moved ahead."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ratui.engine.facade.engine import Engine
from ratui.engine.state.catalog.base import MAIN
from ratui.engine.run.record import RunRecord

from s3_server import isolate_aws, moto_server, new_bucket, past_the_second, s3_client


SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
KEY = "demo.bronze.items"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    isolate_aws(monkeypatch, tmp_path)



def catalog_section(endpoint: str, bucket: str) -> str:
    return f"catalog:\n  warehouse: s3://{bucket}/lake\n  s3:\n    endpoint_url: {endpoint}\n"


def keys(endpoint: str, bucket: str, prefix: str = "") -> set[str]:
    pages = s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def put(endpoint: str, bucket: str, key: str, body: bytes = b"x" * 10) -> str:
    s3_client(endpoint).put_object(Bucket=bucket, Key=key, Body=body)
    return key


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "v": [f"v{i}" for i in range(start, start + n)]},
                    schema=SCHEMA)


def object_key(uri: str, bucket: str) -> str:
    """s3://bucket/k, s3a://bucket/k -> k"""
    return uri.split("://", 1)[1].removeprefix(f"{bucket}/")


def reachable(engine: Engine, bucket: str) -> set[str]:
    """Every object a live ref reaches, through PyIceberg's inspect tables (not the reaper's marker), and each
    pointer's previous metadata file (the catalog keeps it)."""
    out = {p.previous for p in engine.state.catalog.every_pointer() if p.previous}
    for ref in engine.state.catalog.list_refs():
        for key in engine.state.catalog.table_pointers(ref.name):
            table = engine.state.catalog.load_table(ref.name, key)
            out.add(table.metadata_location)
            out.update(e.metadata_file for e in table.metadata.metadata_log)
            out.update(s.manifest_list for s in table.metadata.snapshots)
            if table.metadata.snapshots:
                out.update(table.inspect.all_manifests().column("path").to_pylist())
                out.update(table.inspect.all_files().column("file_path").to_pylist())
    return {object_key(u, bucket) for u in out}


def names(items) -> list[str]:
    return sorted(i["name"] for i in items)


def add_run(engine: Engine, run_id: str, status: str) -> None:
    RunRecord(engine.state.history).create(run_id, KEY, "test", "full_refresh", None)
    RunRecord(engine.state.history).update(run_id, status=status, branch=f"run-{run_id}", pid=1, host="elsewhere")


# ---------------------------------------------------------------------------------- the reaper, in process


def test_sweep_and_expiry_in_the_bucket_spare_what_refs_runs_and_other_projects_hold(tmp_path, endpoint):
    bucket = new_bucket(endpoint, prefix="wh")
    root = tmp_path / "proj"
    (root / "demo/pipelines/bronze/items").mkdir(parents=True)
    (root / "demo/pipelines/bronze/items/pipeline.sql").write_text("SELECT 1 AS id\n")
    (root / "ratui.yaml").write_text("namespace: demo\n" + catalog_section(endpoint, bucket) +
                                     "reaper:\n  orphan_file_max_age_hours: 24\n  snapshot_max_age_days: 1\n")
    engine = Engine.open(root)
    catalog = engine.state.catalog
    location = catalog.table_location(KEY)
    assert location == f"s3://{bucket}/lake/demo/warehouse/bronze/items"
    catalog.create_table(MAIN, KEY, SCHEMA, location).append(rows(3))
    # a file another engine wrote and registered as s3a://: reachable under either spelling
    table_prefix = "lake/demo/warehouse/bronze/items"
    buf = pa.BufferOutputStream()
    pq.write_table(rows(2, 100), buf)
    put(endpoint, bucket, f"{table_prefix}/data/external.parquet", buf.getvalue().to_pybytes())
    catalog.load_table(MAIN, KEY).add_files([f"s3a://{bucket}/{table_prefix}/data/external.parquet"])
    catalog.create_branch("feature")
    catalog.load_table("feature", KEY).append(rows(1, 200))
    catalog.load_table(MAIN, KEY).overwrite(rows(4, 50))  # main replaces everything: older snapshots expire
    add_run(engine, "livewrite", "running")
    add_run(engine, "deadrun", "failed")
    junk = {put(endpoint, bucket, k) for k in (
        f"{table_prefix}/data/junk-1.parquet", f"{table_prefix}/metadata/99999-junk.metadata.json",
        "lake/demo/warehouse/bronze/dropped/data/old.parquet", "lake/_ratui/staging/deadrun/result/part-0.parquet")}
    of_live_run = {put(endpoint, bucket, k) for k in (
        f"{table_prefix}/data/run-livewrite-0a1b2c3d/part-0.parquet", "lake/_ratui/staging/livewrite/part-0.parquet")}
    spared = {put(endpoint, bucket, k) for k in (
        "lake/_ratui/staging/2612010000aaaaaa/part-0.parquet",  # another project's run (a shared bucket)
        "lake/other/warehouse/bronze/t/data/x.parquet",  # another project's namespace
        "lake/demo/warehousex/y.parquet", "outside/demo/warehouse/z.parquet")}
    live = reachable(engine, bucket)
    assert f"{table_prefix}/data/external.parquet" in live
    before = keys(endpoint, bucket)
    assert live | junk | of_live_run | spared == before

    # every object was written just now: too young to go
    now = engine.reaper().run(dry_run=True, tasks=["snapshots", "orphan_files"])
    assert now.ok and now.tasks["orphan_files"].found == [] and now.tasks["snapshots"].found == []
    assert now.tasks["orphan_files"].stats["young_unreachable"] == len(junk)

    later = datetime.now(timezone.utc) + timedelta(days=2)
    dry = engine.reaper(clock=lambda: later).run(dry_run=True, tasks=["orphan_files"])
    task = dry.tasks["orphan_files"]
    assert dry.ok and names(task.found) == sorted(f"s3://{bucket}/{k}" for k in junk), task.error
    assert task.stats["protected_live_run"] == 2 and task.stats["other_projects_staging"] == 1
    assert task.bytes_found == 10 * len(junk) and keys(endpoint, bucket) == before

    real = engine.reaper(clock=lambda: later).run(tasks=["orphan_files"])
    assert real.ok and names(real.tasks["orphan_files"].removed) == names(task.found)
    assert keys(endpoint, bucket) == before - junk
    assert catalog.load_table("feature", KEY).scan().to_arrow().num_rows == 6
    assert sorted(catalog.load_table(MAIN, KEY).scan().to_arrow().column("id").to_pylist()) == [50, 51, 52, 53]

    # snapshot expiry on main, then the sweep frees what only the expired snapshots reached, and the run's files
    RunRecord(engine.state.history).update("livewrite", status="failed")
    catalog.delete_branch("feature")
    old_snapshots = len(catalog.load_table(MAIN, KEY).metadata.snapshots)
    expired = engine.reaper(clock=lambda: later).run(tasks=["snapshots", "orphan_files"])
    assert expired.ok, expired.errors
    assert len(expired.tasks["snapshots"].removed) == old_snapshots - 1
    swept = {object_key(i["path"], bucket) for i in expired.tasks["orphan_files"].removed}
    assert f"{table_prefix}/data/external.parquet" in swept and of_live_run <= swept
    main = catalog.load_table(MAIN, KEY)
    assert len(main.metadata.snapshots) == 1
    assert sorted(main.scan().to_arrow().column("id").to_pylist()) == [50, 51, 52, 53]
    assert keys(endpoint, bucket) == reachable(engine, bucket) | spared


def test_an_object_rewritten_after_the_plan_or_outside_the_warehouse_is_kept(endpoint):
    from ratui.engine.ops.orphan_stores import ObjectStore
    from ratui.engine.ops.orphans import OrphanFile, SweepArea
    from ratui.engine.storage.s3 import S3Access
    from ratui.engine.storage.warehouse import Warehouse

    bucket = new_bucket(endpoint, prefix="wh")
    warehouse = Warehouse(Path("/nonexistent"), S3Access(bucket, endpoint), "lake")
    area = SweepArea(ObjectStore(warehouse), warehouse.url, [warehouse.namespace_root("demo")])
    old, rewritten = (put(endpoint, bucket, f"lake/demo/warehouse/t/data/{n}.parquet") for n in ("old", "new"))
    outside = put(endpoint, bucket, "elsewhere/demo/warehouse/t/data/x.parquet")
    plan = area.plan(set(), older_than=time.time() + 5, live_runs=())
    assert sorted(object_key(o.path, bucket) for o in plan.orphans) == sorted([old, rewritten])
    cutoff = past_the_second()  # LastModified counts whole seconds: both objects are dated before the cutoff
    past_the_second(cutoff)
    put(endpoint, bucket, rewritten)  # written again after the plan: young now (dated in a second after the cutoff)
    planned = {object_key(o.path, bucket): o for o in plan.orphans}
    assert area.remove(planned[rewritten], older_than=cutoff) is None
    assert area.remove(planned[old], older_than=cutoff) == 10
    assert area.remove(planned[old], older_than=cutoff) is None  # gone already
    assert area.remove(OrphanFile(f"s3a://{bucket}/{outside}", 10, 0.0), older_than=cutoff) is None
    assert keys(endpoint, bucket) == {rewritten, outside}


# ------------------------------------------------------------------------------ real runs, as a user runs them

STRATEGIES = {
    "full_refresh": "",
    "append_only": "",
    "incremental": "-- @unique_key: id\n",
    "delete_insert": "-- @unique_key: id\n",
    "scd2": "-- @unique_key: id\n",
    "snapshot": "-- @partition_column: grp\n",
}
# a few changed keys of a 100-row file: merge-on-read (a position-delete file), then compacted by the reaper
MOR = """\
-- @merge_strategy: incremental
-- @unique_key: id
-- @landing_mode: new_files
-- @archive_landing_zones: true
SELECT CAST(id AS INT) AS id, CAST(val AS INT) AS val FROM {{ landing_zone('many') }}
"""
MANY_ROWS = [(i, "", {5: 500, 6: 600}.get(i, i)) for i in range(1, 101)]  # after many_2.csv
SETTINGS = """\
namespace: demo
spark:
  master: local[2]
  config:
    spark.sql.shuffle.partitions: 2
    spark.default.parallelism: 2
reaper:
  compact_deleted_percent: 1
"""


def run_ok(engine: Engine) -> dict[str, dict]:
    results = [r.to_dict() for r in engine.run(engine.compile().select([]))]
    assert results and all(r["status"] == "success" for r in results), results
    return {r["pipeline"].rsplit(".", 1)[1]: r for r in results}


def plain_rows(root: Path, endpoint: str, table: str) -> list[tuple]:
    """A table of main read by plain PyIceberg (its own SqlCatalog on the project's database, S3 settings given
    here): (id, grp, val) sorted, grp '' for a table without it."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("main", uri=f"sqlite:///{root / '.ratui/ratui.db'}", **{
        "s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing"})
    arrow = catalog.load_table(f"demo.silver.{table}").scan().to_arrow()
    grp = arrow.column("grp").to_pylist() if "grp" in arrow.column_names else [""] * arrow.num_rows
    return sorted(zip(arrow.column("id").to_pylist(), grp, arrow.column("val").to_pylist()))


def test_every_strategy_merge_on_read_compaction_rollback_and_expiry_on_s3(tmp_path, spark, endpoint):
    bucket = new_bucket(endpoint, prefix="wh")
    root = tmp_path / "proj"
    files = {"ratui.yaml": SETTINGS + catalog_section(endpoint, bucket),
             "demo/landing/items/items_1.csv": "id,grp,val\n1,a,10\n2,a,20\n3,b,30\n",
             "demo/landing/many/many_1.csv": "id,val\n" + "".join(f"{i},{i}\n" for i in range(1, 101)),
             "demo/pipelines/silver/many/pipeline.sql": MOR}
    for strategy, extra in STRATEGIES.items():
        files[f"demo/pipelines/silver/{strategy}/pipeline.sql"] = (
            f"-- @merge_strategy: {strategy}\n-- @landing_mode: new_files\n{extra}"
            "SELECT CAST(id AS INT) AS id, grp, CAST(val AS INT) AS val FROM {{ landing_zone('items') }}\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    engine = Engine.open(root)
    first = run_ok(engine)
    (root / "demo/landing/items/items_2.csv").write_text("id,grp,val\n2,a,25\n5,a,50\n")
    (root / "demo/landing/many/many_2.csv").write_text("id,val\n5,500\n6,600\n")
    second = run_ok(engine)
    assert {name: r["strategy"] for name, r in second.items()} == {**{s: s for s in STRATEGIES}, "many": "incremental"}
    write = second["many"]["write"]
    assert write["delete_files_added"] == 1 and write["rows_deleted_by_position"] == 2, write
    tables = keys(endpoint, bucket, "lake/demo/warehouse/silver/")
    assert any("/many/data/run-" in k and "/delete-" in k for k in tables), "no position-delete file in the bucket"
    # another reader applies the delete file too
    assert plain_rows(root, endpoint, "many") == MANY_ROWS
    assert not list(root.glob("demo/warehouse")), "a table file was written to the project folder"

    report = engine.reap()
    assert report.ok, report.errors
    assert len(report.tasks["compaction"].removed) == 1, report.tasks["compaction"]

    # full_refresh back as its first run left it: one new commit on main
    plan = engine.plan_rollback(MAIN, first["full_refresh"]["run_id"], "silver.full_refresh")
    assert [c.table for c in plan.changes] == ["demo.silver.full_refresh"]
    assert engine.rollback(plan).hash

    # ten days on: every snapshot but the current ones expires, and the sweep frees what they alone reached (the
    # file compaction replaced and its delete file among them): the bucket holds what main reaches, no more; the
    # older archived landing file goes, the newest stays
    later = datetime.now(timezone.utc) + timedelta(days=10)
    swept = engine.reaper(clock=lambda: later).run(tasks=["orphan_branches", "processed_files", "snapshots",
                                                          "orphan_files"])
    assert swept.ok, swept.errors
    assert names(swept.tasks["processed_files"].removed) == [
        f"demo/landing/many/_processed/{first['many']['run_id']}/many_1.csv"]
    assert (root / f"demo/landing/many/_processed/{second['many']['run_id']}/many_2.csv").is_file()
    gone = {object_key(i["path"], bucket) for i in swept.tasks["orphan_files"].removed}
    assert any("/many/data/" in k and "/delete-" in k for k in gone), gone
    assert keys(endpoint, bucket) == reachable(engine, bucket)

    expected = {
        "full_refresh": [(1, "a", 10), (2, "a", 20), (3, "b", 30)],
        "append_only": [(1, "a", 10), (2, "a", 20), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "incremental": [(1, "a", 10), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "delete_insert": [(1, "a", 10), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "scd2": [(1, "a", 10), (2, "a", 20), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "snapshot": [(2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "many": MANY_ROWS,
    }
    # one query for every table: what `ratui query` gives
    grp = {t: "grp" for t in STRATEGIES} | {"many": "''"}
    sql = " UNION ALL ".join(
        [f"SELECT '{t}' AS t, id, {grp[t]} AS grp, val FROM silver.{t}" for t in expected]
        + ["SELECT 'scd2_open' AS t, id, grp, val FROM silver.scd2 WHERE valid_to IS NULL"])
    got: dict[str, list] = {t: [] for t in [*expected, "scd2_open"]}
    columns, result, truncated = engine.query(sql)
    assert columns == ["t", "id", "grp", "val"] and not truncated
    for t, id_, grp_, val in result:
        got[t].append((id_, grp_, val))
    engine.close()
    scd2_open = sorted(got.pop("scd2_open"))
    assert {t: sorted(v) for t, v in got.items()} == expected
    assert scd2_open == [(1, "a", 10), (2, "a", 25), (3, "b", 30), (5, "a", 50)]

    # plain PyIceberg, outside ratui, with the same S3 settings: the same rows
    assert {t: plain_rows(root, endpoint, t) for t in expected} == expected
