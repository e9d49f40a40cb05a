"""Tables in an s3:// warehouse (catalog.warehouse), against moto's S3 server on 127.0.0.1: what a user relies on
when the tables leave the project folder, and the faults of the store, each a coded error that changes nothing."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from ratui.engine.facade.engine import Engine

from mainstate import main_fingerprint, run_one
from s3_server import isolate_aws, moto_server, new_bucket, s3_client
from tests.servers import ratui


ORDERS = """\
-- @merge_strategy: incremental
-- @unique_key: id
SELECT * FROM VALUES (1, 'a', 10.5), (2, 'b', 20.0), (3, 'c', 7.25) AS t(id, name, amount)
"""
SECRET = "wJalrXUtnFEMI-ratui-secret-do-not-print"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    isolate_aws(monkeypatch, tmp_path)



def on_s3(root: Path, endpoint: str, bucket: str, extra: str = "") -> Path:
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + (
        f"catalog:\n  warehouse: s3://{bucket}/lake\n  s3:\n    endpoint_url: {endpoint}\n    region: us-east-1\n"
        + extra))
    return root


def objects(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    out = []
    for page in s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def test_a_table_in_the_s3_warehouse_is_there_and_plain_pyiceberg_reads_what_ratui_query_gives(
        make_project, spark, endpoint):
    bucket = new_bucket(endpoint, prefix="wh")
    root = on_s3(make_project({"demo/pipelines/bronze/orders/pipeline.sql": ORDERS}), endpoint, bucket)
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.orders")
    assert result.status == "success", result.error

    # every file of the table is an object under the warehouse prefix; nothing of it in the project folder
    keys = objects(endpoint, bucket, "lake/demo/warehouse/bronze/orders/")
    assert any(k.endswith(".parquet") for k in keys) and any(k.endswith(".metadata.json") for k in keys)
    assert not (root / "demo" / "warehouse").exists()

    columns, rows, _truncated = engine.query("SELECT id, name, amount FROM bronze.orders ORDER BY id")
    assert rows == [[1, "a", 10.5], [2, "b", 20.0], [3, "c", 7.25]]

    # another engine: PyIceberg alone, from the metadata file the catalog points at and the store's settings
    from pyiceberg.table import StaticTable

    with sqlite3.connect(root / ".ratui" / "ratui.db") as db:
        (location,) = db.execute("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = 'main' AND "
                                 "table_name = 'orders'").fetchone()
    assert location.startswith(f"s3://{bucket}/lake/demo/warehouse/bronze/orders/metadata/")
    table = StaticTable.from_metadata(location, properties={
        "s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing"})
    got = table.scan().to_arrow().sort_by("id")
    assert [[r["id"], r["name"], r["amount"]] for r in got.to_pylist()] == rows


def test_store_faults_fail_the_run_at_once_coded_with_main_unchanged_and_the_key_never_shown(
        make_project, spark, endpoint, tmp_path):
    bucket = new_bucket(endpoint, prefix="wh")
    root = on_s3(make_project({"demo/pipelines/bronze/orders/pipeline.sql": ORDERS}), endpoint, bucket)
    assert run_one(Engine.open(root), "demo.bronze.orders").status == "success"
    before = main_fingerprint(root)
    good = (root / "ratui.yaml").read_text()

    def run_with(settings: str, expect: str) -> None:
        (root / "ratui.yaml").write_text(settings)
        began = time.monotonic()
        result = run_one(Engine.open(root), "demo.bronze.orders", force=True)
        assert result.status == "failed" and result.error["code"] == expect, result.error
        assert time.monotonic() - began < 30, "a store fault must fail within seconds"
        assert SECRET not in json.dumps(result.error)
        (root / "ratui.yaml").write_text(good)
        assert main_fingerprint(root) == before
        assert [r.name for r in Engine.open(root).refs() if r.name.startswith("run-")] == []

    # keys given in ratui.yaml that the store refuses (a server that checks credentials and knows none of ours)
    with moto_server(tmp_path / "moto-auth", auth=True) as strict:
        s3_client(endpoint)  # the good store stays as it is
        run_with(good.replace(endpoint, strict) + f"    access_key_id: AKIARATUIEXAMPLE\n"
                 f"    secret_access_key: {SECRET}\n", "RAT-S3-002")
    # nothing listens at the endpoint: a port held bound and never listening, so that no other process of the
    # machine (a JVM's random port, say) can take it between picking it and the run's first request
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        run_with(good.replace(endpoint, f"http://127.0.0.1:{reserved.getsockname()[1]}"), "RAT-S3-001")
    # the bucket is not there
    run_with(good.replace(f"s3://{bucket}/", f"s3://{bucket}-gone/"), "RAT-S3-003")

    # the secret never reached a log or the state database
    for path in [*(root / ".ratui").rglob("*.log"), root / ".ratui" / "ratui.db"]:
        assert SECRET.encode() not in path.read_bytes(), path


def test_a_spark_without_the_s3_connector_is_a_coded_error_that_says_how_to_get_it(make_project, endpoint,
                                                                                     tmp_path):
    """Offline, with no hadoop-aws in the local Maven repository: Spark cannot fetch the connector ratui asks for."""
    bucket = new_bucket(endpoint, prefix="wh")
    ivy = tmp_path / "ivysettings.xml"  # Spark's package resolution with no repository at all: offline
    ivy.write_text('<ivysettings><settings defaultResolver="none"/><resolvers><chain name="none"/></resolvers>'
                   '</ivysettings>')
    root = make_project({"demo/pipelines/bronze/orders/pipeline.sql": ORDERS})
    text = (root / "ratui.yaml").read_text().replace("  config:\n", f"  config:\n    spark.jars.ivySettings: {ivy}\n")
    (root / "ratui.yaml").write_text(text)
    on_s3(root, endpoint, bucket)
    out = ratui("run", "--project", str(root), "--json", "orders", timeout=180,
                env={"RATUI_MAVEN_REPO": str(tmp_path / "empty-m2"), "AWS_ACCESS_KEY_ID": "testing",
                     "AWS_SECRET_ACCESS_KEY": "testing", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                     "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")})
    assert out.returncode == 1, out.stdout + out.stderr
    (result,) = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert result["status"] == "failed" and result["error"]["code"] == "RAT-S3-005", result
    assert "hadoop-aws" in result["error"]["message"] and "mvn dependency:get" in result["error"]["hint"]
    assert objects(endpoint, bucket) == []  # nothing written


def test_with_a_nessie_catalog_the_tables_go_to_the_s3_warehouse_and_another_checkout_reads_them(
        make_project, spark, endpoint, nessie_uri):
    from tests.nessie_server import reset

    reset(nessie_uri)
    bucket = new_bucket(endpoint, prefix="wh")
    root = make_project({"demo/pipelines/bronze/orders/pipeline.sql": ORDERS})
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + (
        f"catalog:\n  type: nessie\n  uri: {nessie_uri}\n  warehouse: s3://{bucket}/shared\n  s3:\n"
        f"    endpoint_url: {endpoint}\n    region: us-east-1\n"))
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.orders").status == "success"
    assert objects(endpoint, bucket, "shared/demo/warehouse/bronze/orders/data/")
    # what Nessie holds for main points into the bucket, and a second checkout (no files of its own) reads it
    pointers = engine.state.catalog.table_pointers("main")
    assert pointers["demo.bronze.orders"].startswith(f"s3://{bucket}/shared/demo/warehouse/bronze/orders/metadata/")
    other = make_project({"demo/pipelines/bronze/orders/pipeline.sql": ORDERS}, name="checkout2")
    (other / "ratui.yaml").write_text((root / "ratui.yaml").read_text())
    _columns, rows, _ = Engine.open(other).query("SELECT id FROM bronze.orders ORDER BY id")
    assert rows == [[1], [2], [3]]


def test_nessie_started_with_the_documented_settings_serves_ratuis_s3_tables_through_its_own_iceberg_rest(
        make_project, spark, endpoint, tmp_path):
    """docs/team/nessie.md: Nessie's own Iceberg REST catalog (/iceberg/main) serves the tables ratui writes to an
    s3:// warehouse, with the settings ratui derives from the project's ratui.yaml (nessie_setup.properties_for) and
    the key as Nessie's secret, from its environment only."""
    from pyiceberg.catalog.rest import RestCatalog

    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog import nessie_setup
    from tests.nessie_server import nessie_server

    bucket = new_bucket(endpoint, prefix="served")
    root = make_project({"demo/pipelines/bronze/orders/pipeline.sql": ORDERS})
    base = (root / "ratui.yaml").read_text()
    catalog = (f"catalog:\n  type: nessie\n  uri: {{uri}}\n  warehouse: s3://{bucket}/shared\n  s3:\n"
               f"    endpoint_url: {endpoint}\n    region: us-east-1\n")
    (root / "ratui.yaml").write_text(base + catalog.format(uri="http://127.0.0.1:9/api/v2"))
    properties = nessie_setup.properties_for(load_settings(root))
    assert properties[f"nessie.catalog.warehouses.{nessie_setup.WAREHOUSE_NAME}.location"] == f"s3://{bucket}/shared"
    assert not any("testing" in v for v in properties.values())  # the key is never a setting on the command line
    with nessie_server(tmp_path / "nessie", properties, env=nessie_setup.secret_env("testing", "testing")) as uri:
        (root / "ratui.yaml").write_text(base + catalog.format(uri=uri))
        assert run_one(Engine.open(root), "demo.bronze.orders").status == "success"
        served = RestCatalog("nessie", uri=uri.removesuffix("/api/v2") + "/iceberg/main", **{
            "s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing"})
        table = served.load_table("demo.bronze.orders")
        assert table.metadata_location.startswith(f"s3://{bucket}/shared/demo/warehouse/bronze/orders/metadata/")
        rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert [(r["id"], r["name"], r["amount"]) for r in rows] == [(1, "a", 10.5), (2, "b", 20.0), (3, "c", 7.25)]
