"""Which compiler ratui's own JVM uses (spark/jit.py, ratui.yaml spark.jit): quick for a `ratui run` over small
inputs, full for long-lived processes and big inputs, as ratui.yaml says when it says. No Spark is started here:
the choice is made before the JVM exists (the JVM's log line is checked in tests/cli/test_cli.py)."""

from __future__ import annotations

import os

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import load_settings
from ratui.engine.facade.engine import Engine
from ratui.engine.run.work_size import input_bytes
from ratui.engine.spark import jit

BRONZE = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('orders') }}\n"
SILVER = "SELECT * FROM {{ ref('bronze.orders') }}\n"


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    """Each test is a new process as far as the choice goes (no engine has said its work is small)."""
    monkeypatch.setattr(jit, "_small_work", None)


@pytest.fixture
def small(make_project):
    return make_project({
        "demo/landing/orders/o1.csv": "id,amount\n1,10\n2,20\n",
        "demo/pipelines/bronze/orders/pipeline.sql": BRONZE,
        "demo/pipelines/silver/orders_clean/pipeline.sql": SILVER,
    })


def one_shot(root, keys=None, **kwargs) -> str:
    engine = Engine.open(root)
    compiled = engine.compile()
    engine.expect_one_shot(keys or sorted(compiled.pipelines), compiled, **kwargs)
    return jit.mode(engine.settings)


def test_a_run_over_small_inputs_gets_the_quick_compiler_and_says_why(small, monkeypatch):
    monkeypatch.setattr("ratui.engine.spark.session.start_soon", lambda settings: None)  # no JVM in this test
    assert jit.mode(load_settings(small)) == "full"  # nothing said yet: a console, a watch
    assert one_shot(small) == "quick"
    settings = load_settings(small)
    assert jit.java_option(settings) == "-XX:TieredStopAtLevel=1"
    assert "2 pipeline(s) reading at most" in jit.describe(settings)


def test_big_inputs_keep_the_full_compiler(small, monkeypatch):
    monkeypatch.setattr("ratui.engine.spark.session.start_soon", lambda settings: None)
    big = small / "demo/landing/orders/o2.csv"
    with open(big, "wb") as out:  # sparse: 40 MB by its size, nothing on disk
        out.truncate(jit.SMALL_INPUT_BYTES + 8 * 1024 * 1024)
    assert one_shot(small, ["demo.silver.orders_clean"]) == "quick"  # reads only the bronze table, still empty
    assert one_shot(small, ["demo.bronze.orders"]) == "full"
    assert jit.java_option(load_settings(small)) == ""


def test_a_table_read_counts_with_its_data_files(small, monkeypatch):
    monkeypatch.setattr("ratui.engine.spark.session.start_soon", lambda settings: None)
    data = small / "demo/warehouse/bronze/orders/data"
    data.mkdir(parents=True)
    with open(data / "00000-big.parquet", "wb") as out:
        out.truncate(jit.SMALL_INPUT_BYTES + 1)
    assert one_shot(small, ["demo.silver.orders_clean"]) == "full"


def test_ratui_yaml_decides_when_it_says(small, monkeypatch):
    monkeypatch.setattr("ratui.engine.spark.session.start_soon", lambda settings: None)
    yaml = small / "ratui.yaml"
    base = yaml.read_text()
    yaml.write_text(base.replace("spark:\n", "spark:\n  jit: full\n"))
    assert one_shot(small) == "full"
    assert jit.describe(load_settings(small)) == "full (spark.jit full)"
    yaml.write_text(base.replace("spark:\n", "spark:\n  jit: quick\n"))
    assert jit.mode(load_settings(small)) == "quick"  # even in a long-lived process
    yaml.write_text(base.replace("spark:\n", "spark:\n  jit: fast\n"))
    with pytest.raises(RatuiError) as caught:
        load_settings(small)
    assert caught.value.code == "RAT-CFG-007" and "spark.jit" in caught.value.message


def test_a_cluster_or_an_object_store_zone_keeps_the_full_compiler(small, monkeypatch):
    monkeypatch.setattr("ratui.engine.spark.session.start_soon", lambda settings: None)
    yaml = small / "ratui.yaml"
    base = yaml.read_text()
    yaml.write_text(base.replace("master: local[2]", "master: spark://127.0.0.1:7077"))
    assert one_shot(small) == "full"  # the work runs on the executors, not in ratui's JVM
    yaml.write_text(base + "landing:\n  zones:\n    orders: s3://bucket/orders\n")
    engine = Engine.open(small)
    assert input_bytes(engine.compile(), ["demo.bronze.orders"]) is None  # its size is not known here
    assert one_shot(small, ["demo.bronze.orders"]) == "full"


def test_input_bytes_counts_each_folder_once_follows_no_folder_link_and_stops_past_its_limit(small, tmp_path):
    compiled = Engine.open(small).compile()
    landing = small / "demo/landing/orders"
    csv = (landing / "o1.csv").stat().st_size
    assert input_bytes(compiled, ["demo.bronze.orders"]) == csv
    # the silver pipeline reads the bronze table (no data yet); both pipelines: the zone counts once
    assert input_bytes(compiled, ["demo.bronze.orders", "demo.silver.orders_clean"]) == csv
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "huge.csv").write_bytes(b"x" * 10_000)
    os.symlink(elsewhere, landing / "linked")  # a folder link inside a zone is not followed
    (landing / "o3.csv").symlink_to(elsewhere / "huge.csv")  # a file link is read: it counts as its target
    assert input_bytes(compiled, ["demo.bronze.orders"]) == csv + 10_000
    assert input_bytes(compiled, ["demo.bronze.orders"], limit=100) <= 10_000 + csv


def test_the_first_pipeline_to_run_starts_spark_on_the_side(small, monkeypatch):
    """(A run whose pipelines are all unchanged starts no JVM at all: tests/cli/test_cli.py.)"""
    started = []
    monkeypatch.setattr("ratui.engine.spark.session.start_soon", lambda settings: started.append(settings.root))
    one_shot(small)
    assert started == [small]  # a first run: the JVM boots while the invocation gets ready
    started.clear()
    one_shot(small, ["demo.silver.orders_clean"], force=True)
    assert started == [small]


def test_a_query_over_small_tables_gets_the_quick_compiler_big_tables_keep_the_full_one(small):
    engine = Engine.open(small)
    engine.expect_one_shot_query()
    assert jit.mode(engine.settings) == "quick"
    assert "a query over tables of at most 0 bytes" in jit.describe(engine.settings)
    data = small / "demo/warehouse/silver/orders_clean/data"
    data.mkdir(parents=True)
    with open(data / "00000-big.parquet", "wb") as out:
        out.truncate(jit.SMALL_INPUT_BYTES + 1)
    engine.expect_one_shot_query()
    assert jit.mode(engine.settings) == "full"
