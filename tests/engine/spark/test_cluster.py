"""ratui as the driver of a Spark standalone cluster (spark.master: spark://HOST:PORT) on 127.0.0.1.

A Master and one Worker (2 cores) are started once for this module from pyspark's own distribution
(tests/servers.py) and always stopped; a test that kills a Worker starts its own. They run on a hidden disk
(tests/hidden_disk.py): like a cluster's machines they see neither the projects nor ratui's state, so the tables are
in moto's S3, and the executors get S3A's jars and each bucket's settings from the driver. ratui runs through its
command line in processes of its own (this process holds the local SparkSession the other tests share).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.engine.conftest import checksum_sql, sample_keys
from tests.engine.spark.conftest import bucket_keys, s3_catalog
from tests.servers import (json_lines, main_head, make_slow_project, master_state, query, ratui, ratui_background,
                           running_run, start_master, start_worker, wait_for, with_spark)



@pytest.fixture(scope="module")
def cluster(hidden_disk):
    tmp = hidden_disk.folder("cluster")
    master = start_master(tmp, disk=hidden_disk)
    try:
        worker = start_worker(master, tmp, cores=2, disk=hidden_disk)
        try:
            yield master
        finally:
            worker.stop()
    finally:
        master.stop()


def table_columns(root: Path, key: str, *columns: str) -> list[list]:
    """Columns of a table on main, read by PyIceberg in this process through the project's catalog (no driver and
    no application on the cluster for it: `ratui query` on a cluster is the sample's test)."""
    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    settings = load_settings(root)
    catalog = open_catalog(catalog_config(settings.catalog), settings.db_path, root)
    table = catalog.load_table("main", key).scan().to_arrow()
    return [table.column(c).to_pylist() for c in columns]


def run_json(*args: str) -> tuple[int, list[dict]]:
    out = ratui("run", *args, "--json")
    return out.returncode, json_lines(out.stdout)


def test_the_sample_project_gives_on_the_cluster_what_it_gives_locally(cluster, moto, bucket, sample_copy,
                                                                       local_sample):
    """Executors that see none of the project, the tables in S3; the landing zones local, so ratui uploads them to
    the warehouse's staging prefix for each run (the Connect test reads them in place from S3)."""
    with_spark(sample_copy, master=cluster.url, catalog=s3_catalog(moto, bucket))
    assert sample_keys(sample_copy) == sorted(local_sample["keys"])
    code, results = run_json("--project", str(sample_copy), "--threads", "2")  # independent pipelines side by side
    assert code == 0 and all(r["status"] == "success" for r in results), results
    sql = checksum_sql(local_sample["keys"], local_sample["columns"])
    assert {r["t"]: (r["n"], r["h"]) for r in query(sample_copy, sql)} == local_sample["first"]
    # the work ran on the cluster: the app had executors on the Worker
    apps = master_state(cluster)["completedapps"]
    assert any(app["name"] == "ratui:sample" for app in apps), apps
    objects = bucket_keys(moto, bucket)
    assert any(k.startswith("lake/") and k.endswith(".parquet") for k in objects), objects[:20]
    # the landing files ratui uploaded for each run went with it
    assert not [k for k in objects if k.endswith(("_SUCCESS", ".crc")) or "/_ratui/staging/" in k]
    assert not (sample_copy / "ecommerce" / "warehouse").exists()


def test_cancel_interrupts_the_executors_tasks(cluster, hidden_disk, moto, bucket, tmp_path):
    # 60 tasks on 2 cores, each waiting at a gate the test never opens: only the cancel can end the job
    project = make_slow_project(tmp_path / "slow", rows=60, parts=60, master=cluster.url,
                                control=hidden_disk.folder("control"), catalog=s3_catalog(moto, bucket))
    project.set(version=2, delay=0, gated=60)
    head = main_head(project.root)
    slow = ratui_background("run", "--project", str(project.root), "--json", "slow", log=tmp_path / "slow.log")
    try:
        run_id = running_run(project.root, "slow", time.monotonic() + 90)
        wait_for(lambda: list(project.markers.iterdir()), 90, "a task running on an executor")
        began = time.monotonic()
        out = ratui("cancel", "--project", str(project.root), run_id)
        assert out.returncode == 0, out.stdout + out.stderr
        slow.wait(timeout=60)
        ended = time.monotonic() - began
    finally:
        if slow.poll() is None:
            slow.kill()
    (result,) = json_lines((tmp_path / "slow.log").read_text())
    assert result["status"] == "cancelled" and result["error"]["code"] == "RAT-RUN-001", result
    assert ended < 20, ended
    lines = project.marker_lines()
    assert len(lines) < 30, lines  # most tasks never started
    # the tasks ran in the Worker's executor, not in ratui's process
    assert all("/worker-work/app-" in folder for rows in lines.values() for folder in rows), lines
    assert main_head(project.root) == head  # main unchanged, the run's branch gone
    assert not [k for k in bucket_keys(moto, bucket, "lake/demo/warehouse/bronze/slow/") if k.endswith(".parquet")]


def test_a_worker_killed_mid_run_is_retried_on_the_other(cluster, hidden_disk, moto, bucket, tmp_path):
    # a second Worker of 1 core; the run's tasks are spread over both; one task of the second is killed with it
    spare = start_worker(cluster, hidden_disk.folder("spare"), cores=1, name="spare", disk=hidden_disk)
    try:
        project = make_slow_project(tmp_path / "slow", rows=48, parts=12, master=cluster.url,
                                    control=hidden_disk.folder("control"), catalog=s3_catalog(moto, bucket))
        project.set(version=3, delay=0.5)
        slow = ratui_background("run", "--project", str(project.root), "--json", "slow", log=tmp_path / "slow.log")
        spare_dir = str(spare.extra["work_dir"])

        def on_spare() -> list[str]:
            return [name for name, rows in project.marker_lines().items() if any(spare_dir in r for r in rows)]

        try:
            killed = wait_for(on_spare, 120, "a task running on the spare Worker")
            spare.kill()  # the Worker, its executor and its Python workers, at once
            slow.wait(timeout=180)
        finally:
            if slow.poll() is None:
                slow.kill()
    finally:
        spare.stop()
    (result,) = json_lines((tmp_path / "slow.log").read_text())
    # Spark's own retry finishes the job on the Worker left: the run succeeds with every row exactly once
    assert slow.returncode == 0 and result["status"] == "success", result
    ids, versions = table_columns(project.root, "demo.bronze.slow", "id", "version")
    assert (len(ids), len(set(ids)), sum(ids), min(versions)) == (48, 48, 1128, 3)
    lines = project.marker_lines()
    for name in killed:  # each task killed with the spare Worker ran again, as another attempt, on the other one
        partition = name.split("-")[0]
        retries = [other for other in lines if other.split("-")[0] == partition and other != name]
        assert retries and all(spare_dir not in row for other in retries for row in lines[other]), (name, lines)
    assert main_head(project.root)[1] == []
