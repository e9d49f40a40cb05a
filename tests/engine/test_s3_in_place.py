"""S3 landing zones Spark reads where they are (landing.s3_read: in_place), and local files handed to a Spark that
cannot see this disk, against moto's server on 127.0.0.1 (a real HTTP endpoint, nothing patched).

The checks without Spark (ranged reads pinned to the listed ETag, change detection, the upload to a run's staging
prefix) and the runs on a local Spark go through the Engine in this process: its session's Spark carries Hadoop's
S3A connector (tests/conftest.py), and each run's session gets the zones' bucket settings. A Spark that cannot see
this disk, and `ratui run` on it, is tested in tests/engine/spark/test_connect.py (a Connect server on a hidden
disk).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.landing.formats.csv_types import csv_types
from ratui.engine.landing.formats.parquet import parquet_schema
from ratui.engine.landing.read_checks import check_text
from ratui.engine.landing.s3 import S3Zone
from ratui.engine.project.settings import load_settings
from ratui.engine.facade.engine import Engine
from ratui.engine.state.ledger import Ledger
from ratui.engine.storage.staging import RemoteStaging, run_staging
from ratui.engine.storage.warehouse import object_warehouse

from mainstate import main_fingerprint
from s3_server import isolate_aws, moto_server, new_bucket, s3_client



@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    isolate_aws(monkeypatch, tmp_path)



def keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    out = []
    for page in s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


# ------------------------------------------------------------------------------------- without Spark


def test_the_checks_read_an_object_in_place_pinned_to_the_listed_version(endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    s3.put_object(Bucket=bucket, Key="z/a.csv", Body=b"id,day\n1,2025-01-02\n2,2025-01-03\n")
    big = pa.table({"id": list(range(50_000)), "name": [f"n{i}" for i in range(50_000)]})
    s3.put_object(Bucket=bucket, Key="z/b.parquet", Body=parquet_bytes(big))
    s3.put_object(Bucket=bucket, Key="z/c.parquet", Body=parquet_bytes(big)[:-20] + b"\x00" * 16 + b"PAR1")
    s3.put_object(Bucket=bucket, Key="z/d.csv", Body=b"id,name\n1,caf\xe9\n")
    zone = S3Zone(bucket, "z/", endpoint_url=endpoint, name="z", in_place=True)
    files = zone.stage(zone.list(), tmp_path / "staging")
    assert not (tmp_path / "staging").exists()  # nothing downloaded
    a = files["a.csv"]
    assert a.path is None and a.spark_uri == f"s3://{bucket}/z/a.csv" and a.where == a.spark_uri
    assert check_text(a, "CSV").startswith(b"id,day\n")
    assert csv_types([a]) == ["int", "date"]
    assert list(a.lines()) == [b"id,day\n", b"1,2025-01-02\n", b"2,2025-01-03\n"]
    assert parquet_schema(files["b.parquet"]).names == ["id", "name"]  # from its footer, by ranged reads
    with pytest.raises(RatuiError) as caught:
        parquet_schema(files["c.parquet"])
    assert caught.value.code == "RAT-LND-008" and caught.value.file == f"s3://{bucket}/z/c.parquet"
    with pytest.raises(RatuiError) as caught:
        check_text(files["d.csv"], "CSV")
    assert caught.value.code == "RAT-LND-008" and caught.value.line == 2

    # its identity is the listing's (no request); a rewritten object is never read as the listed one
    listed = zone.list()[0]
    assert a.identity == (f"s3://{bucket}/z/a.csv", a.size, listed.mtime_ns, listed.etag, None)
    # a copy downloaded pinned to that ETag is the same file to the memos, whichever staging folder it is in
    staged = S3Zone(bucket, "z/", endpoint_url=endpoint, name="z")
    copies = [staged.stage([listed], tmp_path / f"run{i}")["a.csv"] for i in (1, 2)]
    assert copies[0].path != copies[1].path and copies[0].identity == copies[1].identity == a.identity
    s3.put_object(Bucket=bucket, Key="z/b.parquet", Body=b"PAR1 rewritten PAR1")
    with pytest.raises(RatuiError) as caught:
        parquet_schema(files["b.parquet"])
    assert caught.value.code == "RAT-S3-004" and caught.value.file == f"s3://{bucket}/z/b.parquet"


@pytest.mark.parametrize("versioned", [False, True])
def test_objects_read_in_place_that_changed_or_went_are_reported(endpoint, versioned):
    bucket = new_bucket(endpoint, versioned=versioned)
    s3 = s3_client(endpoint)
    for name in ("a.csv", "b.csv", "c.csv", "d.csv"):
        s3.put_object(Bucket=bucket, Key=f"z/{name}", Body=b"id\n1\n")
    s3.put_object(Bucket=bucket, Key="z/_processed/r1/e.csv", Body=b"id\n5\n")
    in_place = S3Zone(bucket, "z/", endpoint_url=endpoint, name="z", in_place=True)
    staged = S3Zone(bucket, "z/", endpoint_url=endpoint, name="z")
    read = in_place.list() + in_place.processed()
    assert in_place.changed(read) == []
    s3.put_object(Bucket=bucket, Key="z/a.csv", Body=b"id\n1\n2\n")  # replaced, another size
    s3.put_object(Bucket=bucket, Key="z/b.csv", Body=b"id\n7\n")  # replaced, the same size
    s3.delete_object(Bucket=bucket, Key="z/c.csv")
    s3.delete_object(Bucket=bucket, Key="z/_processed/r1/e.csv")
    found = {e.name: how for e, how in in_place.changed(read)}  # gone ones whatever `removed` says
    assert found == {"a.csv": "5 -> 7 bytes", "b.csv": "rewritten", "c.csv": "removed",
                     "_processed/r1/e.csv": "removed"}
    assert staged.changed(read, removed=True) == []  # staged reads were pinned: nothing to say

    # archived by another run (copied with its bytes, then deleted): what was read was the listed object
    [d] = [e for e in read if e.name == "d.csv"]
    s3.copy_object(Bucket=bucket, Key="z/_processed/r2/d.csv", CopySource={"Bucket": bucket, "Key": "z/d.csv"})
    s3.delete_object(Bucket=bucket, Key="z/d.csv")
    assert in_place.changed([d]) == []
    assert in_place.changed([d], removed=True) == [(d, "removed")]  # a read that failed may have failed for it


def test_local_files_for_a_spark_that_cannot_see_this_disk_go_to_the_runs_staging_prefix(endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    root = tmp_path / "p"
    (root / "demo/pipelines").mkdir(parents=True)
    settings_text = (f"namespace: demo\ncatalog:\n  warehouse: s3://{bucket}/lake\n  s3:\n"
                     f"    endpoint_url: {endpoint}\n")
    (root / "ratui.yaml").write_text(settings_text)
    assert run_staging(load_settings(root), "r1") is None  # a local Spark reads this disk
    (root / "ratui.yaml").write_text(settings_text + "spark:\n  remote: sc://127.0.0.1:1\n")
    staging = run_staging(load_settings(root), "r1")
    assert staging is not None and staging.url == f"s3://{bucket}/lake/_ratui/staging/r1"
    folder = root / "demo/landing/orders"
    (folder / "_processed/r0").mkdir(parents=True)
    names = {"a.csv": b"id\n1\n", "b c.csv": b"id\n2\n", "x:[1].csv": b"id\n3\n", "_processed/r0/d.csv": b"id\n4\n"}
    for name, data in names.items():
        (folder / name).write_bytes(data)
    seen = []
    uris = staging.upload([(folder / n, staging.place("orders", n)) for n in names],
                          lambda done, total, size: seen.append((done, total, size)))
    prefix = f"s3://{bucket}/lake/_ratui/staging/r1/landing/orders/"
    assert uris == [prefix + "a.csv", prefix + "b c.csv", prefix + "_renamed/f00001.csv",
                    prefix + "_processed/r0/d.csv"]  # a name Hadoop misreads gets a safe one
    s3 = s3_client(endpoint)
    assert [s3.get_object(Bucket=bucket, Key=u.split("/", 3)[3])["Body"].read() for u in uris] == list(names.values())
    assert seen[-1] == (4, 4, 20)
    assert staging.remove() == 4
    assert keys(endpoint, bucket) == []
    assert RemoteStaging(staging.access, staging.key).remove() == 0  # nothing uploaded: no request
    with pytest.raises(RatuiError) as caught:  # a bucket that is not there: coded, naming it
        RemoteStaging.of(object_warehouse({"warehouse": f"s3://{bucket}-nope/x", "s3": {"endpoint_url": endpoint}},
                                          root), "r2").upload([(folder / "a.csv", "landing/orders/a.csv")])
    assert caught.value.code == "RAT-S3-003"


# ------------------------------------------------------------------------------------- runs

PEOPLE = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('people') }}\n"
EVENTS = """\
-- @merge_strategy: append_only
-- @landing_mode: new_files
-- @archive_landing_zones: true
SELECT * FROM {{ landing_zone('events') }}
"""
# replaces or deletes an object of its zone after ratui listed and checked it and before Spark reads it, as told
# by mutate.json beside ratui.yaml (read once, then removed)
MUTATING = '''\
# @merge_strategy: append_only
# @landing_mode: new_files
# @isolation: none
# (the test's stand-in for another writer: it reaches the bucket with boto3, which a confined pipeline cannot)
import json
from pathlib import Path

import boto3


def run(ctx):
    df = ctx.landing_zone("orders")
    order = Path(__file__).resolve().parents[4] / "mutate.json"
    if order.exists():
        todo = json.loads(order.read_text())
        order.unlink()
        s3 = boto3.client("s3", endpoint_url=todo["endpoint"], region_name="us-east-1")
        if todo["do"] == "replace":
            s3.put_object(Bucket=todo["bucket"], Key=todo["key"], Body=todo["body"].encode())
        else:
            s3.delete_object(Bucket=todo["bucket"], Key=todo["key"])
    return df
'''


def in_place_project(root: Path, endpoint: str, zones: dict[str, str], pipelines: dict[str, str]) -> Path:
    for rel, text in pipelines.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "ratui.yaml").write_text(
        "namespace: demo\nspark:\n  master: local[2]\n  config:\n    spark.sql.shuffle.partitions: 2\n"
        f"landing:\n  s3_read: in_place\n  s3:\n    endpoint_url: {endpoint}\n  zones:\n"
        + "".join(f"    {zone}: {url}\n" for zone, url in zones.items()))
    return root


def run(root: Path) -> dict[str, dict]:
    """Every pipeline of the project, as `ratui run` runs them: {pipeline: its result}."""
    engine = Engine.open(root)
    try:
        results = {r.pipeline: r.to_dict() for r in engine.run(engine.compile().select([]))}
    finally:
        engine.close()
    assert results
    return results


def table(root: Path, key: str, column: str = "id") -> list:
    """A column of a table on main, read with PyIceberg (the project's catalog: its tables may be on S3)."""
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    settings = load_settings(root)
    catalog = open_catalog(catalog_config(settings.catalog), settings.db_path, root)
    return sorted(catalog.load_table("main", key).scan().to_arrow().column(column).to_pylist())


def run_log(root: Path, run_id: str) -> str:
    """The run's notes and log, as `ratui show` prints them (debug lines left out)."""
    engine = Engine.open(root)
    try:
        record = engine.get_run(run_id)
        return "\n".join([*(record.get("notes") or []),
                          *(e["message"] for e in record["logs"] if e["level"] != "debug")])
    finally:
        engine.close()


def ledger(root: Path, zone: str) -> dict[str, tuple[str, int]]:
    files = Ledger(root / ".ratui" / "ratui.db").files("demo", zone)
    return {f.file: (f.state, f.attempts) for f in files}


def test_zones_read_in_place_load_what_staging_loads_once_and_archive_in_the_bucket(spark, endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    people = {"a.csv": b"id,name,day,score\n1,ann,2025-01-02,1.5\n2,bob,2025-01-03,2.0\n",
              "b c.csv": b"name,id,day,score\ncid,3,2025-01-04,3\n",  # columns by name; a space in the name
              "d[1].csv": b"id,name,day,score\n4,dan,2025-01-05,4.25\n",  # glob characters: read by its name
              "e.csv": b""}  # empty: left out with a warning
    for name, body in people.items():
        s3.put_object(Bucket=bucket, Key=f"raw/people/{name}", Body=body)
    s3.put_object(Bucket=bucket, Key="raw/people/_samples/x.csv", Body=b"id,name,day,score\n99,never,,\n")
    s3.put_object(Bucket=bucket, Key="events/a.jsonl", Body=b'{"id": 1}\n{"id": 2}\n')
    root = in_place_project(tmp_path / "p", endpoint, {"people": f"s3://{bucket}/raw/people",
                                                       "events": f"s3://{bucket}/events/"},
                            {"demo/pipelines/bronze/people/pipeline.sql": PEOPLE,
                             "demo/pipelines/bronze/events/pipeline.sql": EVENTS})
    first = run(root)
    assert {k: r["status"] for k, r in first.items()} == {"demo.bronze.people": "success",
                                                         "demo.bronze.events": "success"}, first
    assert table(root, "demo.bronze.people") == [1, 2, 3, 4]
    assert table(root, "demo.bronze.people", "score") == [1.5, 2.0, 3.0, 4.25]
    assert any("RAT-LND-009 e.csv" in n for n in first["demo.bronze.people"]["notes"])
    log = run_log(root, first["demo.bronze.people"]["run_id"])
    assert "read in place" in log and "fetched" not in log, log
    assert not (root / ".ratui" / "staging").exists() or not any((root / ".ratui" / "staging").rglob("*.csv"))
    events_run = first["demo.bronze.events"]["run_id"]
    assert keys(endpoint, bucket, "events/") == [f"events/_processed/{events_run}/a.jsonl"]  # archived on S3
    assert ledger(root, "events") == {f"_processed/{events_run}/a.jsonl": ("loaded", 1)}

    # the same objects staged (downloaded, read by Spark from this disk) give the same table
    staged = tmp_path / "staged"
    in_place_project(staged, endpoint, {"people": f"s3://{bucket}/raw/people"},
                     {"demo/pipelines/bronze/people/pipeline.sql": PEOPLE})
    (staged / "ratui.yaml").write_text((staged / "ratui.yaml").read_text().replace("in_place", "staged"))
    assert run(staged)["demo.bronze.people"]["status"] == "success"
    assert main_fingerprint(staged)["demo.bronze.people"] == main_fingerprint(root)["demo.bronze.people"]

    # exactly once: the next run loads the new object only, and nothing else is read again
    s3.put_object(Bucket=bucket, Key="events/b.jsonl", Body=b'{"id": 3}\n')
    second = run(root)
    assert second["demo.bronze.events"]["status"] == "success", second
    assert second["demo.bronze.people"]["status"] == "skipped"
    assert table(root, "demo.bronze.events") == [1, 2, 3]
    assert run(root)["demo.bronze.events"]["status"] == "skipped"


def test_an_object_replaced_or_deleted_while_the_run_reads_it_fails_the_run_and_main_stays(spark, endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    s3.put_object(Bucket=bucket, Key="orders/a.csv", Body=b"id\n1\n")
    root = in_place_project(tmp_path / "p", endpoint, {"orders": f"s3://{bucket}/orders"},
                            {"demo/pipelines/bronze/orders/pipeline.py": MUTATING})
    assert run(root)["demo.bronze.orders"]["status"] == "success"
    before = main_fingerprint(root)

    # replaced between ratui's listing and Spark's read: Spark would read the new bytes as the listed object
    s3.put_object(Bucket=bucket, Key="orders/b.csv", Body=b"id\n2\n")
    order = {"endpoint": endpoint, "bucket": bucket, "key": "orders/b.csv"}
    (root / "mutate.json").write_text(json.dumps({**order, "do": "replace", "body": "id\n2\n3\n"}))
    replaced = run(root)["demo.bronze.orders"]
    assert replaced["status"] == "failed"
    assert replaced["error"]["code"] == "RAT-LND-010", replaced["error"]
    assert replaced["error"]["file"] == f"s3://{bucket}/orders/b.csv"
    assert "b.csv (5 -> 7 bytes)" in replaced["error"]["message"]
    assert main_fingerprint(root) == before
    assert ledger(root, "orders")["b.csv"] == ("unloaded", 0)  # not the file's fault: no attempt counted
    again = run(root)["demo.bronze.orders"]  # the next run loads it as it is now
    assert again["status"] == "success", again
    assert table(root, "demo.bronze.orders") == [1, 2, 3]
    before = main_fingerprint(root)

    # deleted after listing: Spark cannot read it; a coded error, nothing merged
    s3.put_object(Bucket=bucket, Key="orders/c.csv", Body=b"id\n4\n")
    (root / "mutate.json").write_text(json.dumps({**order, "key": "orders/c.csv", "do": "delete"}))
    deleted = run(root)["demo.bronze.orders"]
    assert deleted["status"] == "failed"
    assert deleted["error"]["code"] == "RAT-LND-010", deleted["error"]
    assert "c.csv (removed)" in deleted["error"]["message"] and "RAT-S3-004" in deleted["error"]["message"]
    assert main_fingerprint(root) == before


BAD_ZONES = {
    "rows": {"a.csv": b"id,name\n1,ann\n2,bob,extra\n3,cid\n"},
    "text": {"a.csv": b"id,name\n1,ann\n2,b\xffb\n"},
    "damaged": {"a.parquet": b"PAR1" + b"\x00" * 64 + b"PAR1"},
    "docs": {"a.json": b'[\n  {"id": 1},\n  {"id": 2,}\n]\n'},
    "good": {"a.parquet": None, "b.parquet": None},
}


def test_bad_objects_read_in_place_are_coded_errors_at_their_line(spark, endpoint, tmp_path):
    bucket = new_bucket(endpoint)
    s3 = s3_client(endpoint)
    for zone, objects in BAD_ZONES.items():
        for name, body in objects.items():
            body = body if body is not None else parquet_bytes(pa.table({"id": [len(name)], "name": [name]}))
            s3.put_object(Bucket=bucket, Key=f"{zone}/{name}", Body=body)
    root = in_place_project(
        tmp_path / "p", endpoint, {zone: f"s3://{bucket}/{zone}" for zone in BAD_ZONES},
        {f"demo/pipelines/bronze/{zone}/pipeline.sql": PEOPLE.replace("people", zone) for zone in BAD_ZONES})
    results = run(root)
    errors = {key.rsplit(".", 1)[1]: r["error"] for key, r in results.items()}
    assert errors["good"] is None and table(root, "demo.bronze.good") == [9, 9]
    assert (errors["rows"]["code"], errors["rows"]["file"], errors["rows"]["line"]) == \
        ("RAT-LND-007", f"s3://{bucket}/rows/a.csv", 3)
    assert (errors["text"]["code"], errors["text"]["file"], errors["text"]["line"]) == \
        ("RAT-LND-008", f"s3://{bucket}/text/a.csv", 3)
    assert (errors["damaged"]["code"], errors["damaged"]["file"]) == ("RAT-LND-008", f"s3://{bucket}/damaged/a.parquet")
    assert (errors["docs"]["code"], errors["docs"]["file"], errors["docs"]["line"]) == \
        ("RAT-LND-007", f"s3://{bucket}/docs/a.json", 3)
    assert set(main_fingerprint(root)) == {"demo.bronze.good"}
