"""Runs on real Spark, real Iceberg files and a real SQLite file: phases, gates, branches, history."""

from __future__ import annotations

import os
import socket

import pytest

from ratui.engine.events import PhaseStarted
from ratui.engine.facade.engine import Engine

ORDERS_1 = "order_id,status,amount,updated_at\n1,placed,10.50,2026-01-01 10:00:00\n2,placed,20.00,2026-01-01 11:00:00\n"
ORDERS_2 = "order_id,status,amount,updated_at\n1,shipped,10.50,2026-01-02 09:00:00\n3,placed,5.25,2026-01-02 10:00:00\n"

RAW = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('orders') }}\n"
CLEAN = """\
-- @merge_strategy: incremental
-- @unique_key: order_id
-- @watermark_column: updated_at
SELECT CAST(order_id AS BIGINT) AS order_id, status, CAST(amount AS DECIMAL(12,2)) AS amount,
       CAST(updated_at AS TIMESTAMP) AS updated_at
FROM {{ ref('bronze.raw_orders') }}
{% if is_incremental() %}WHERE CAST(updated_at AS TIMESTAMP) > TIMESTAMP '{{ watermark_value }}'{% endif %}
"""


def q(engine, sql, ref="main"):
    columns, rows, _ = engine.query(sql, ref=ref)
    return [dict(zip(columns, r)) for r in rows]


def main_state(engine):
    return engine.state.catalog.table_pointers("main")


def branches(engine):
    return [r.name for r in engine.state.catalog.list_refs()]


@pytest.fixture
def orders_project(make_project, spark):
    return make_project({
        "demo/landing/orders/orders_1.csv": ORDERS_1,
        "demo/pipelines/bronze/raw_orders/pipeline.sql": RAW,
        "demo/pipelines/silver/clean_orders/pipeline.sql": CLEAN,
    })


def run(engine, *selectors, **kw):
    keys = engine.compile().select(list(selectors))
    return engine.run(keys, **kw)


def test_run_records_phases_history_and_merges(orders_project):
    engine = Engine.open(orders_project)
    events = []
    engine.subscribe(events.append)
    results = run(engine)
    assert [r.status for r in results] == ["success", "success"]
    assert results[1].rows_written == 2
    assert set(results[0].phases) == {"branch", "config", "build", "write", "quality", "resolve"}
    rows = q(engine, "SELECT order_id, status FROM silver.clean_orders ORDER BY order_id")
    assert rows == [{"order_id": 1, "status": "placed"}, {"order_id": 2, "status": "placed"}]
    assert branches(engine) == ["main"]  # every run branch deleted
    record = engine.state.history.get_run(results[1].run_id)
    assert record["status"] == "success" and record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    assert record["branch"] == f"run-{results[1].run_id}" and record["strategy"] == "incremental"
    assert set(record["phases"]) == set(results[1].phases)
    assert record["phase_status"] == {phase: "done" for phase in results[1].phases}
    assert any("merged" in line["message"] for line in record["logs"])
    names = [type(e).__name__ for e in events if e.run_id == results[0].run_id]
    assert names[0] == "RunQueued" and names[-1] == "RunFinished"
    assert [e.phase for e in events if isinstance(e, PhaseStarted) and e.run_id == results[0].run_id] == \
        ["branch", "config", "build", "write", "quality", "resolve"]


def test_a_warm_forced_run_reuses_the_code_spark_compiled_for_the_last_one(orders_project, spark):
    """Spark compiles generated code for each query stage; ratui's JVM keeps room for the stages of a whole
    project (spark.sql.codegen.cache.maxEntries 1000, Spark's own default 100), so a forced run of what ran
    before compiles next to nothing again."""
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    engine = Engine.open(orders_project)
    run(engine)
    # the first run created the tables: its data diff had no table to compare with, so the first forced run's diff
    # (table against table) is a query not run before; from the next forced run on, nothing is new
    engine.run(engine.compile().select([]), force=True)
    before = metrics.METRIC_COMPILATION_TIME().getCount()
    results = engine.run(engine.compile().select([]), force=True)
    assert [r.status for r in results] == ["success", "success"]
    assert metrics.METRIC_COMPILATION_TIME().getCount() - before <= 3


def test_incremental_uses_watermark_and_upserts(orders_project):
    engine = Engine.open(orders_project)
    run(engine)
    (orders_project / "demo/landing/orders/orders_2.csv").write_text(ORDERS_2)
    logs = []
    engine.subscribe(lambda e: logs.append(e.message) if type(e).__name__ == "LogLine" else None)
    results = run(engine)
    assert [r.status for r in results] == ["success", "success"]
    # bronze holds 4 rows; the watermark filter passes only the 2 rows after 2026-01-01 11:00
    assert results[1].rows_written == 2
    assert any("watermark updated_at = 2026-01-01 11:00:00" in m and "statistics" in m for m in logs)
    rows = q(engine, "SELECT order_id, status FROM silver.clean_orders ORDER BY order_id")
    assert rows == [{"order_id": 1, "status": "shipped"}, {"order_id": 2, "status": "placed"},
                    {"order_id": 3, "status": "placed"}]


def test_incremental_dedupes_within_first_batch_by_latest_watermark(make_project, spark):
    root = make_project({
        "demo/landing/orders/a.csv": ("order_id,status,updated_at\n1,old,2026-01-01 10:00:00\n"
                                      "1,newest,2026-01-03 10:00:00\n1,middle,2026-01-02 10:00:00\n"
                                      "2,only,2026-01-01 00:00:00\n"),
        "demo/pipelines/silver/o/pipeline.sql": (
            "-- @merge_strategy: incremental\n-- @unique_key: order_id\n-- @watermark_column: updated_at\n"
            "SELECT order_id, status, CAST(updated_at AS TIMESTAMP) AS updated_at "
            "FROM {{ landing_zone('orders') }}\n"),
    })
    engine = Engine.open(root)
    (result,) = run(engine)
    assert result.status == "success" and result.rows_written == 2
    assert q(engine, "SELECT order_id, status FROM silver.o ORDER BY order_id") == [
        {"order_id": 1, "status": "newest"}, {"order_id": 2, "status": "only"}]


def test_incremental_without_watermark_keeps_last_in_batch_and_null_keys_group(make_project, spark):
    root = make_project({
        "demo/pipelines/silver/o/pipeline.sql": (
            "-- @merge_strategy: incremental\n-- @unique_key: k\n"
            "SELECT * FROM VALUES (1, 'a'), (1, 'b'), (CAST(NULL AS INT), 'n1'), (CAST(NULL AS INT), 'n2') "
            "AS t(k, v)\n"),
    })
    engine = Engine.open(root)
    assert run(engine)[0].status == "success"
    rows = q(engine, "SELECT k, v FROM silver.o ORDER BY k NULLS FIRST")
    assert rows == [{"k": None, "v": "n2"}, {"k": 1, "v": "b"}]
    assert run(engine, force=True)[0].status == "success"  # re-upserting NULL and 1 replaces, never duplicates
    assert q(engine, "SELECT count(*) AS n FROM silver.o") == [{"n": 2}]


def test_error_quality_failure_leaves_main_untouched_and_no_branch(orders_project):
    engine = Engine.open(orders_project)
    run(engine)
    # a test that fails only on the new data: order 3 arrives in the next file
    tests_dir = orders_project / "demo/pipelines/silver/clean_orders/tests/quality"
    tests_dir.mkdir(parents=True)
    (tests_dir / "no_order_3.sql").write_text("SELECT order_id FROM {{ this }} WHERE order_id = 3\n")
    (orders_project / "demo/landing/orders/orders_2.csv").write_text(ORDERS_2)
    assert run(engine, "raw_orders")[0].status == "success"
    before = main_state(engine)
    snapshot = engine.state.catalog.load_table("main", "demo.silver.clean_orders").current_snapshot().snapshot_id
    results = run(engine, "silver.clean_orders")
    (result,) = results
    assert result.status == "failed" and result.error["code"] == "RAT-RUN-003"
    assert result.quality[0]["status"] == "failed" and result.quality[0]["violations"] == 1
    assert result.quality[0]["sample"] == [[3]]
    assert main_state(engine) == before
    after = engine.state.catalog.load_table("main", "demo.silver.clean_orders").current_snapshot().snapshot_id
    assert after == snapshot
    assert branches(engine) == ["main"]
    stored = engine.state.history.get_run(result.run_id)["quality"][0]
    assert stored["status"] == "failed" and stored["violations"] == 1 and stored["sample"] == [[3]]


def test_warn_failure_merges_and_run_succeeds_with_warnings(orders_project):
    tests_dir = orders_project / "demo/pipelines/silver/clean_orders/tests/quality"
    tests_dir.mkdir(parents=True)
    (tests_dir / "cheap_orders.sql").write_text(
        "-- @severity: warn\nSELECT order_id, amount FROM {{ this }} WHERE amount < 15\n")
    (tests_dir / "ids_present.sql").write_text("SELECT * FROM {{ this }} WHERE order_id IS NULL\n")
    engine = Engine.open(orders_project)
    results = run(engine)
    assert results[1].status == "success" and results[1].warnings == 1
    statuses = {r["test"]: (r["status"], r["violations"]) for r in results[1].quality}
    assert statuses == {"cheap_orders": ("warned", 1), "ids_present": ("passed", 0)}
    assert q(engine, "SELECT count(*) AS n FROM silver.clean_orders") == [{"n": 2}]


def test_quality_test_with_broken_sql_is_error_and_blocks(orders_project):
    tests_dir = orders_project / "demo/pipelines/bronze/raw_orders/tests/quality"
    tests_dir.mkdir(parents=True)
    (tests_dir / "broken.sql").write_text("SELECT no_such_column FROM {{ this }}\n")
    engine = Engine.open(orders_project)
    (result,) = run(engine, "raw_orders")
    assert result.status == "failed" and result.quality[0]["status"] == "error"
    assert "RAT-SQL-002" in result.quality[0]["error"]
    assert main_state(engine) == {}


def test_a_test_failing_at_execution_is_pinned_on_that_test_while_the_others_count(orders_project):
    """The tests of a run are counted in one Spark job; a test whose SQL fails only when it executes (an ANSI cast
    error) must not take the others down with it: it is `error` at its own line, the others keep their counts."""
    tests_dir = orders_project / "demo/pipelines/bronze/raw_orders/tests/quality"
    tests_dir.mkdir(parents=True)
    (tests_dir / "a_fine.sql").write_text("SELECT * FROM {{ this }} WHERE order_id IS NULL\n")
    (tests_dir / "b_bad_cast.sql").write_text("-- casts a status to a number\n"
                                              "SELECT CAST(status AS INT) AS n\nFROM {{ this }}\n")
    (tests_dir / "c_finds_rows.sql").write_text("-- @severity: warn\nSELECT * FROM {{ this }} WHERE amount > 0\n")
    engine = Engine.open(orders_project)
    (result,) = run(engine, "raw_orders")
    by_test = {q["test"]: q for q in result.quality}
    assert (by_test["a_fine"]["status"], by_test["a_fine"]["violations"]) == ("passed", 0)
    assert (by_test["c_finds_rows"]["status"], by_test["c_finds_rows"]["violations"]) == ("warned", 2)
    assert len(by_test["c_finds_rows"]["sample"]) == 2
    assert by_test["b_bad_cast"]["status"] == "error" and "RAT-SQL-002" in by_test["b_bad_cast"]["error"]
    assert result.status == "failed" and result.error["code"] == "RAT-RUN-003"
    assert main_state(engine) == {}


def test_threads_run_independent_pipelines_at_once_and_keep_dependency_order(make_project, spark):
    """--threads 2: the two independent pipelines overlap, the one that reads both starts after both merged, and
    every table holds what a serial run gives."""
    import threading

    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": "SELECT id, id * 2 AS v FROM range(0, 300) AS t(id)\n",
        "demo/pipelines/bronze/b/pipeline.sql": "SELECT id, id * 3 AS v FROM range(0, 200) AS t(id)\n",
        "demo/pipelines/silver/ab/pipeline.sql": (
            "SELECT a.id, a.v + coalesce(b.v, 0) AS v FROM {{ ref('bronze.a') }} a "
            "LEFT JOIN {{ ref('bronze.b') }} b ON a.id = b.id\n"),
    })
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + "run:\n  threads: 2\n")
    engine = Engine.open(root)
    assert engine.settings.run_threads == 2
    lock = threading.Lock()
    running: set[str] = set()
    overlap: list[set[str]] = []
    order: list[tuple[str, str]] = []

    def watch(event) -> None:
        from ratui.engine.events import RunFinished, RunStarted

        with lock:
            if isinstance(event, RunStarted):
                running.add(event.pipeline)
                order.append(("start", event.pipeline))
                if len(running) > 1:
                    overlap.append(set(running))
            elif isinstance(event, RunFinished) and event.pipeline in running:
                running.discard(event.pipeline)
                order.append(("end", event.pipeline))

    engine.subscribe(watch)
    results = run(engine)
    assert sorted(r.status for r in results) == ["success"] * 3
    assert {"demo.bronze.a", "demo.bronze.b"} in overlap, order
    start_ab = order.index(("start", "demo.silver.ab"))
    assert order.index(("end", "demo.bronze.a")) < start_ab and order.index(("end", "demo.bronze.b")) < start_ab
    threaded = q(engine, "SELECT sum(v) AS s, count(*) AS n FROM silver.ab")
    run(engine, force=True, threads=1)
    assert q(engine, "SELECT sum(v) AS s, count(*) AS n FROM silver.ab") == threaded == [
        {"s": sum(i * 2 for i in range(300)) + sum(i * 3 for i in range(200)), "n": 300}]


def test_threads_skip_the_downstream_of_a_failure_and_run_the_rest(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/bad/pipeline.sql": "SELECT CAST('x' AS INT) AS id\n",
        "demo/pipelines/bronze/good/pipeline.sql": "SELECT 1 AS id\n",
        "demo/pipelines/silver/after_bad/pipeline.sql": "SELECT * FROM {{ ref('bronze.bad') }}\n",
    })
    engine = Engine.open(root)
    results = {r.pipeline: r for r in run(engine, threads=2)}
    assert results["demo.bronze.bad"].status == "failed"
    assert results["demo.bronze.good"].status == "success"
    skipped = results["demo.silver.after_bad"]
    assert skipped.status == "skipped" and skipped.error["code"] == "RAT-RUN-005"


def test_landing_zone_never_reads_processed_or_samples(make_project, spark):
    root = make_project({
        "demo/landing/orders/a.csv": "id\n1\n2\n",
        "demo/landing/orders/_processed/run1/old.csv": "id\n100\n",
        "demo/landing/orders/_samples/sample.csv": "id\n999\n",
        "demo/landing/orders/.hidden.csv": "id\n555\n",
        "demo/pipelines/bronze/raw/pipeline.sql": "SELECT * FROM {{ landing_zone('orders') }}\n",
    })
    engine = Engine.open(root)
    assert run(engine)[0].status == "success"
    assert q(engine, "SELECT id FROM bronze.raw ORDER BY id") == [{"id": 1}, {"id": 2}]


def test_full_refresh_with_empty_result_empties_the_table_and_says_so(make_project, spark):
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": "SELECT * FROM VALUES (1), (2) AS t(id)\n"})
    engine = Engine.open(root)
    run(engine)
    (root / "demo/pipelines/bronze/t/pipeline.sql").write_text("SELECT * FROM VALUES (1) AS t(id) WHERE id > 5\n")
    (result,) = run(engine)
    assert result.status == "success" and result.rows_written == 0
    assert any("empty" in n for n in result.notes)
    assert q(engine, "SELECT count(*) AS n FROM bronze.t") == [{"n": 0}]


def test_append_only_appends_each_run(make_project, spark):
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": (
        "-- @merge_strategy: append_only\nSELECT 1 AS id, TIMESTAMP '{{ run_started_at }}' AS loaded_at\n")})
    engine = Engine.open(root)
    run(engine)
    run(engine, force=True)
    rows = q(engine, "SELECT count(*) AS n, count(DISTINCT loaded_at) AS runs FROM bronze.t")
    assert rows == [{"n": 2, "runs": 2}]


def test_run_started_at_is_shared_by_pipeline_and_its_tests(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/t/pipeline.sql": "SELECT TIMESTAMP '{{ run_started_at }}' AS at\n",
        "demo/pipelines/bronze/t/tests/quality/same_time.sql": (
            "SELECT * FROM {{ this }} WHERE at <> TIMESTAMP '{{ run_started_at }}'\n"),
    })
    (result,) = run(Engine.open(root))
    assert result.status == "success" and result.quality[0]["status"] == "passed"


def test_full_refresh_flag_rebuilds_incremental_table(orders_project):
    engine = Engine.open(orders_project)
    run(engine)
    (result,) = run(engine, "clean_orders", full_refresh=True)
    assert result.status == "success" and result.strategy == "full_refresh" and result.rows_written == 2


def test_template_error_at_runtime_fails_with_file_and_line(make_project, spark):
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": "SELECT 1 AS id\n-- {{ no_such_thing }}\n"})
    engine = Engine.open(root)
    (result,) = run(engine)
    assert result.status == "failed"
    assert result.error["code"] == "RAT-TPL-002" and result.error["line"] == 2
    assert result.error["file"].endswith("pipeline.sql")
    assert main_state(engine) == {} and branches(engine) == ["main"]


def test_spark_sql_error_is_coded(make_project, spark):
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": "SELECT nope FROM VALUES (1) AS t(id)\n"})
    engine = Engine.open(root)
    (result,) = run(engine)
    assert result.status == "failed" and result.error["code"] == "RAT-SQL-001"
    assert "nope" in result.error["message"]
    assert branches(engine) == ["main"]


def test_missing_upstream_table_is_coded(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": "SELECT 1 AS id\n",
        "demo/pipelines/silver/b/pipeline.sql": "SELECT * FROM {{ ref('bronze.a') }}\n",
    })
    engine = Engine.open(root)
    (result,) = run(engine, "silver.b")
    assert result.error["code"] == "RAT-CAT-005" and "+b" in result.error["hint"]


def test_upstream_failure_skips_descendants_but_not_independent(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": "SELECT broken FROM nowhere\n",
        "demo/pipelines/silver/b/pipeline.sql": "SELECT * FROM {{ ref('bronze.a') }}\n",
        "demo/pipelines/bronze/c/pipeline.sql": "SELECT 1 AS id\n",
    })
    engine = Engine.open(root)
    results = {r.pipeline: r for r in run(engine)}
    assert results["demo.bronze.a"].status == "failed"
    assert results["demo.silver.b"].status == "skipped"
    assert results["demo.silver.b"].error["code"] == "RAT-RUN-005"
    assert results["demo.bronze.c"].status == "success"
    assert engine.state.history.get_run(results["demo.silver.b"].run_id)["reason"].startswith("upstream failed")


def test_cancel_at_a_phase_boundary_leaves_main_unchanged(orders_project):
    engine = Engine.open(orders_project)
    run(engine)
    before = main_state(engine)
    (orders_project / "demo/landing/orders/orders_2.csv").write_text(ORDERS_2)

    def cancel_on_write(event):
        if isinstance(event, PhaseStarted) and event.phase == "quality":
            engine.cancel(event.run_id)

    engine.subscribe(cancel_on_write)
    (result,) = run(engine, "raw_orders")
    assert result.status == "cancelled" and result.error["code"] == "RAT-RUN-001"
    assert main_state(engine) == before and branches(engine) == ["main"]
    assert engine.state.history.get_run(result.run_id)["status"] == "cancelled"


def test_cancel_during_a_running_spark_job(spark, tmp_path):
    """A run whose Spark job is running, its tasks waiting at a gate the test never opens (tests/servers.py): the
    job cannot end by itself, so a run that ends cancelled was interrupted mid-job, through its job group."""
    import threading
    import time

    from ratui.engine.spark import jobs
    from tests.servers import make_slow_project, wait_for

    project = make_slow_project(tmp_path / "slow", rows=8, parts=4)
    project.set(version=1, delay=0, gated=4)
    engine = Engine.open(project.root)
    keys = engine.compile().select(["bronze.slow"])
    invocation = engine.start(keys, trigger="cli")
    run_id = invocation.run_ids[0]
    holder = {}
    worker = threading.Thread(target=lambda: invocation.wait() and holder.update(r=invocation.results[0]))
    worker.start()
    wait_for(lambda: list(project.markers.iterdir()) and (jobs.progress(run_id) or {}).get("jobs_running"), 120,
             "the run's Spark job running, a task at the gate")
    began = time.monotonic()
    assert engine.cancel(run_id) == "requested"
    worker.join(60)
    assert holder["r"].status == "cancelled"
    assert time.monotonic() - began < 10
    assert main_state(engine) == {} and branches(engine) == ["main"]


def test_merge_conflict_retries_the_run(orders_project):
    """Main changes the same table while the run is in flight: the merge conflicts, the run re-runs and lands."""
    engine = Engine.open(orders_project)
    run(engine)
    interfered = []

    def interfere(event):
        if isinstance(event, PhaseStarted) and event.phase == "resolve" and not interfered:
            interfered.append(event.run_id)
            # another writer lands a change to the same table on main first
            other = Engine.open(orders_project)
            other_keys = other.compile().select(["raw_orders"])
            assert other.run(other_keys, force=True)[0].status == "success"

    engine.subscribe(interfere)
    (result,) = run(engine, "raw_orders", force=True)
    assert interfered and result.status == "success", result.error
    logs = [line["message"] for line in engine.state.history.get_run(result.run_id)["logs"]]
    assert any("merge conflict" in m for m in logs)
    assert branches(engine) == ["main"]


def test_python_pipeline(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/a/pipeline.sql": "SELECT * FROM VALUES (1, 'x'), (2, 'y'), (3, 'x') AS t(id, g)\n",
        "demo/pipelines/silver/counts/pipeline.py": (
            "# @merge_strategy: full_refresh\n"
            "def run(ctx):\n"
            "    return ctx.ref('bronze.a').groupBy('g').count()\n"),
    })
    engine = Engine.open(root)
    assert engine.compile().pipelines["demo.silver.counts"].refs == ("demo.bronze.a",)
    results = run(engine)
    assert [r.status for r in results] == ["success", "success"]
    assert q(engine, "SELECT g, `count` AS n FROM silver.counts ORDER BY g") == [{"g": "x", "n": 2}, {"g": "y", "n": 1}]


def test_schema_added_column_evolves_table(make_project, spark):
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": (
        "-- @merge_strategy: append_only\nSELECT 1 AS id\n")})
    engine = Engine.open(root)
    run(engine)
    (root / "demo/pipelines/bronze/t/pipeline.sql").write_text(
        "-- @merge_strategy: append_only\nSELECT 2 AS id, 'new' AS extra\n")
    assert run(engine)[0].status == "success"
    assert q(engine, "SELECT id, extra FROM bronze.t ORDER BY id") == [{"id": 1, "extra": None},
                                                                        {"id": 2, "extra": "new"}]


def test_incompatible_type_change_is_coded_and_main_untouched(make_project, spark):
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": "-- @merge_strategy: append_only\nSELECT 1 AS id\n"})
    engine = Engine.open(root)
    run(engine)
    before = main_state(engine)
    (root / "demo/pipelines/bronze/t/pipeline.sql").write_text("-- @merge_strategy: append_only\nSELECT 'x' AS id\n")
    (result,) = run(engine)
    assert result.error["code"] == "RAT-WRT-003"
    assert main_state(engine) == before


def test_sample_project_end_to_end_and_new_orders_file(local_sample):
    """The bundled sample runs clean; a new orders file then updates silver and gold. The sample's runs are
    local_sample's (tests/engine/conftest.py: a first run, every pipeline a success, then a forced one): this test
    goes on with its project."""
    import subprocess
    import sys

    sample_copy = local_sample["root"]
    assert local_sample["first_warned"] == ["ecommerce.silver.clean_customers"]
    engine = Engine.open(sample_copy)
    before = q(engine, "SELECT count(*) AS n FROM silver.clean_orders")[0]["n"]
    assert before == q(engine, "SELECT count(DISTINCT order_id) AS n FROM bronze.raw_orders")[0]["n"]
    revenue_before = q(engine, "SELECT sum(gross_revenue) AS r FROM gold.daily_revenue")[0]["r"]

    subprocess.run([sys.executable, str(sample_copy / "generate_data.py"), "--month", "4"], check=True,
                   capture_output=True)
    new_file = sample_copy / "ecommerce/landing/orders/orders_2026_04.csv"
    assert new_file.exists()
    results = run(engine, "raw_orders+")
    assert all(r.status == "success" for r in results)
    # silver equals the latest version of every order across all files, computed independently here
    import csv

    latest, earlier_ids = {}, set()
    for path in sorted((sample_copy / "ecommerce/landing/orders").glob("*.csv")):
        with path.open() as fh:
            for row in csv.DictReader(fh):
                key = int(row["order_id"])
                if path != new_file:
                    earlier_ids.add(key)
                if key not in latest or row["updated_at"] > latest[key]["updated_at"]:
                    latest[key] = row
    after = q(engine, "SELECT count(*) AS n FROM silver.clean_orders")[0]["n"]
    assert after == len(latest) > before
    # an order from an earlier file whose latest version is in the new file
    some_updated = min(k for k, v in latest.items() if k in earlier_ids and v["updated_at"].startswith("2026-04"))
    got = q(engine, f"SELECT status FROM silver.clean_orders WHERE order_id = {some_updated}")
    assert got == [{"status": latest[some_updated]["status"].strip().lower()}]
    revenue_after = q(engine, "SELECT sum(gross_revenue) AS r FROM gold.daily_revenue")[0]["r"]
    assert revenue_after > revenue_before
