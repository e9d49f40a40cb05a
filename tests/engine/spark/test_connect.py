"""ratui as a Spark Connect client (spark.remote: sc://HOST:PORT) against a real server on 127.0.0.1.

The server is started once for this module from pyspark's own distribution (tests/servers.py) and always stopped.
It runs on a hidden disk (tests/hidden_disk.py): like a server on another machine it sees neither the projects nor
ratui's state, so the tests keep their tables in moto's S3 (catalog.warehouse: s3://...), and any local path ratui
handed to Spark would fail them. ratui runs through its command line in processes of its own: this process holds
the classic local SparkSession the other tests share, and a process is either a Connect client or a JVM's driver,
not both.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from ratui.engine.spark import s3a
from tests.conftest import REPO
from tests.engine.conftest import checksum_sql, sample_keys
from tests.engine.s3_server import s3_client
from tests.engine.spark.conftest import bucket_keys, s3_catalog, upload_landing
from tests.servers import (json_lines, main_head, make_slow_project, query, ratui, ratui_background, running_run,
                           start_connect, wait_for, with_spark)



@pytest.fixture(scope="module")
def servers(hidden_disk):
    """The module's Connect server, on a disk of its own: it sees neither the projects nor ratui's state (all
    under this machine's /tmp), only what is in S3; started exactly as docs/team/spark.md tells a team (S3A's jars,
    the documented ones and no more: tests/servers.py).
    Calling it gives the live server; the last test kills it (a server gone mid-run), and a test after that would
    get a new one."""
    started: list = []

    def live():
        if not started or not started[-1].alive():
            folder = hidden_disk.folder(f"connect-{len(started)}")
            started.append(start_connect(folder, disk=hidden_disk))
        return started[-1]

    try:
        yield live
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def server(servers):
    return servers()


HIDDEN_CHECK = """\
import json, sys
from pyspark.sql import SparkSession

url, local_file, s3_url, conf = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
spark = SparkSession.builder.remote(url).create()
try:
    spark.read.text(local_file).collect()
    local = "read"
except Exception as exc:
    local = getattr(exc, "getCondition", lambda: None)() or type(exc).__name__
for key, value in conf.items():
    spark.conf.set(key, value)
rows = [tuple(r) for r in spark.read.parquet(s3_url).orderBy("id").collect()]
print(json.dumps({"local": local, "s3": rows}))
"""


def test_the_server_sees_s3_and_not_this_machines_disk(server, hidden_disk, moto, bucket, tmp_path):
    """The harness's own proof: a file of a project, read here, is a missing path to the server; an object in
    moto's bucket, with the settings ratui sets on a session, reads."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ratui.engine.storage.s3 import S3Access

    local_file = tmp_path / "project" / "notes.txt"
    local_file.parent.mkdir()
    local_file.write_text("only on this disk\n")
    assert local_file.read_text() and not hidden_disk.sees(local_file) and not hidden_disk.sees(tmp_path)
    assert not hidden_disk.sees(REPO / "sample_project")  # nor ratui's code and sample
    body = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2], "name": ["ann", "bob"]}), body)
    s3_client(moto).put_object(Bucket=bucket, Key="probe/people.parquet", Body=body.getvalue())
    conf = {**s3a.SCHEME_CONF, **S3Access(bucket, endpoint_url=moto).spark_conf()}
    out = subprocess.run([sys.executable, "-c", HIDDEN_CHECK, server.url, str(local_file),
                          f"s3://{bucket}/probe/people.parquet", json.dumps(conf)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout) == {"local": "PATH_NOT_FOUND", "s3": [[1, "ann"], [2, "bob"]]}


def settings(remote: str, catalog: dict | None = None, **sections) -> str:
    """ratui.yaml of a test project on a Connect server (tables in S3 when `catalog` says so)."""
    data = {"namespace": "demo", "spark": {"remote": remote}, **({"catalog": catalog} if catalog else {}), **sections}
    return yaml.safe_dump(data, sort_keys=False)


def checksums(project, sql) -> dict[str, tuple[int, int]]:
    return {row["t"]: (row["n"], row["h"]) for row in query(project, sql)}


def run_ok(*args: str, server=None) -> list[dict]:
    """`server`: its log's last lines are shown when the run fails (a server that went away says why there)."""
    out = ratui("run", *args, "--json")
    results = json_lines(out.stdout)
    failed = "\n".join(f"{r['pipeline']}: {r['error']}" for r in results if r["status"] == "failed")
    where = f"\nthe server ({'alive' if server.alive() else 'gone'}):\n{server.log_tail(80)}" if server else ""
    assert out.returncode == 0, (failed or out.stdout[-3000:] + out.stderr[-3000:]) + where
    assert results and all(r["status"] == "success" for r in results), results
    return results


def test_the_sample_project_gives_on_connect_what_it_gives_locally(server, moto, bucket, sample_copy, local_sample):
    """On a server that sees none of the project, with its tables in S3 and its landing zones too, read in place
    (the cluster's test keeps them local: ratui uploads them for the run)."""
    with_spark(sample_copy, remote=server.url, catalog=s3_catalog(moto, bucket))
    upload_landing(sample_copy, moto, bucket)
    assert sample_keys(sample_copy) == sorted(local_sample["keys"])
    run_ok("--project", str(sample_copy), "--threads", "2", server=server)  # two at a time, a session each
    sql = checksum_sql(local_sample["keys"], local_sample["columns"])
    assert checksums(sample_copy, sql) == local_sample["first"]
    # forced, two at a time again: what a forced run gives locally
    results = run_ok("--project", str(sample_copy), "--force", "--threads", "2", server=server)
    assert len(results) == len(local_sample["keys"])
    assert checksums(sample_copy, sql) == local_sample["forced"]
    # the client wrote no JVM log: there is no JVM in its process
    assert not (sample_copy / ".ratui" / "logs" / "jvm.out").exists()
    assert "Spark Connect" in (sample_copy / ".ratui" / "logs" / "spark.log").read_text()
    # the tables are in the bucket, and only there; without Spark's marker and checksum files
    objects = bucket_keys(moto, bucket)
    assert any(k.startswith("lake/") and k.endswith(".parquet") for k in objects), objects[:20]
    assert not [k for k in objects if k.endswith(("_SUCCESS", ".crc")) or "/_ratui/staging/" in k]
    assert not (sample_copy / "ecommerce" / "warehouse").exists()


CLIENT_CHECK = """\
import json, sys
from pathlib import Path
import psutil
from ratui.engine.project.settings import load_settings
from ratui.engine.spark import jobs, session as spark_mod

settings = load_settings(Path(sys.argv[1]))
spark = spark_mod.get_spark(settings)
run = jobs.new_run_session(settings, "check")
rows = run.sql("SELECT 41 + 1 AS answer").collect()
from pyspark import SparkContext
print(json.dumps({
    "answer": rows[0].answer,
    "remote": spark_mod.is_remote(),
    "where": spark_mod.describe(),
    "time_zone": run.conf.get("spark.sql.session.timeZone"),
    "timestamps": run.conf.get("spark.sql.parquet.outputTimestampType"),
    "gateway": SparkContext._gateway is not None,
    "java_children": [p.name() for p in psutil.Process().children(recursive=True) if "java" in p.name()],
}))
jobs.end_run("check")
"""


def test_the_client_has_no_jvm_and_sets_ratuis_sql_settings_on_each_session(server, tmp_path):
    root = tmp_path / "p"
    (root / "demo" / "pipelines").mkdir(parents=True)
    (root / "ratui.yaml").write_text(f"namespace: demo\nspark:\n  remote: {server.url}\n")
    out = subprocess.run([sys.executable, "-c", CLIENT_CHECK, str(root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # nothing on the terminal the console draws on
    facts = json.loads(out.stdout)
    assert facts == {"answer": 42, "remote": True, "where": f"Spark Connect {server.bare_url} (server local[2])",
                     "time_zone": "UTC", "timestamps": "TIMESTAMP_MICROS", "gateway": False, "java_children": []}


def test_an_unreachable_server_fails_the_run_at_once_with_a_coded_error(tmp_path):
    from tests.servers import free_port

    root = tmp_path / "p"
    (root / "demo" / "pipelines" / "bronze" / "x").mkdir(parents=True)
    (root / "demo" / "pipelines" / "bronze" / "x" / "pipeline.sql").write_text("SELECT 1 AS id\n")
    (root / "ratui.yaml").write_text(f"namespace: demo\nspark:\n  remote: sc://127.0.0.1:{free_port()}\n")
    began = time.monotonic()
    out = ratui("run", "--project", str(root), "--json", timeout=120)
    assert time.monotonic() - began < 60  # not the Connect client's ten minutes of retries
    (result,) = json_lines(out.stdout)
    assert out.returncode == 1 and result["status"] == "failed"
    assert result["error"]["code"] == "RAT-SPK-001"
    assert "not reachable" in result["error"]["message"]


def _one_pipeline_project(root, remote: str, catalog: dict):
    (root / "demo" / "pipelines" / "bronze" / "x").mkdir(parents=True)
    (root / "demo" / "pipelines" / "bronze" / "x" / "pipeline.sql").write_text("SELECT 1 AS id\n")
    (root / "ratui.yaml").write_text(settings(remote, catalog))
    return root


def test_the_servers_token_is_required_and_never_shown(server, moto, bucket, tmp_path):
    """The server wants its token: a wrong one, or none, is RAT-SPK-003 naming the cause (never the token) and
    writes nothing; a token for 127.0.0.1 without TLS is refused at once with the fix (PySpark would try TLS and
    retry for a minute); the token from SPARK_CONNECT_AUTHENTICATE_TOKEN works, and reaches no log or record."""
    wrong = "wrong-" + server.token[::-1]
    cases = {
        "wrong": (f"{server.bare_url}/;token={wrong}", "refused the token ratui gave it"),
        "none": (server.bare_url, "wants a token and ratui gave none"),
        "ip": (server.url.replace("localhost", "127.0.0.1"), "sent only to sc://localhost or over TLS"),
    }
    for name, (remote, words) in cases.items():
        root = _one_pipeline_project(tmp_path / name, remote, s3_catalog(moto, bucket, name))
        began = time.monotonic()
        out = ratui("run", "--project", str(root), "--json", timeout=120)
        assert time.monotonic() - began < 60, name
        (result,) = json_lines(out.stdout)
        assert out.returncode == 1 and result["status"] == "failed", (name, result)
        assert result["error"]["code"] == "RAT-SPK-003", (name, result)
        assert words in result["error"]["message"], (name, result["error"])
        everything = out.stdout + out.stderr + _state_text(root)
        assert server.token not in everything and wrong not in everything, name
        assert main_head(root)[1] == []  # no run branch left

    root = _one_pipeline_project(tmp_path / "env", server.bare_url, s3_catalog(moto, bucket, "env"))
    out = ratui("run", "--project", str(root), "--json", env={"SPARK_CONNECT_AUTHENTICATE_TOKEN": server.token})
    (result,) = json_lines(out.stdout)
    assert result["status"] == "success", result
    assert server.token not in out.stdout + out.stderr + _state_text(root)
    listed = ratui("runs", "--project", str(root), "--json")
    assert server.token not in listed.stdout

    root = _one_pipeline_project(tmp_path / "in-yaml", server.url, s3_catalog(moto, bucket, "in-yaml"))
    # the token in spark.remote works too ...
    run_ok("--project", str(root))
    shown = ratui("runs", "--project", str(root), "--json").stdout + _state_text(root, skip=("ratui.yaml",))
    assert server.token not in shown  # ... and is shown nowhere but the file it was written in


def _state_text(root, skip: tuple[str, ...] = ()) -> str:
    """Every byte ratui wrote under .ratui/ (logs, the state database), as text."""
    parts = []
    for path in sorted((root / ".ratui").rglob("*")):
        if path.is_file() and path.name not in skip:
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


GATE_PIPELINE = """\
-- @merge_strategy: full_refresh
SELECT CAST(id AS INT) AS id, CAST(amount AS INT) AS amount FROM {{ landing_zone('items') }}
"""


def test_a_failed_quality_gate_leaves_main_as_it_was(server, moto, bucket, tmp_path):
    root = tmp_path / "gate"
    files = {
        "ratui.yaml": settings(server.url, s3_catalog(moto, bucket)),
        "demo/landing/items/items.csv": "id,amount\n1,10\n2,20\n",
        "demo/pipelines/bronze/items/pipeline.sql": GATE_PIPELINE,
        "demo/pipelines/bronze/items/tests/quality/positive_amount.sql":
            "-- @severity: error\nSELECT * FROM {{ this }} WHERE amount <= 0\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    run_ok("--project", str(root))
    head, others = main_head(root)
    (root / "demo/landing/items/items.csv").write_text("id,amount\n1,10\n2,-5\n3,30\n")
    out = ratui("run", "--project", str(root), "--json")
    (result,) = json_lines(out.stdout)
    assert out.returncode == 1 and result["status"] == "failed", result
    assert result["error"]["code"] == "RAT-RUN-003"
    assert [(q["test"], q["status"], q["violations"]) for q in result["quality"]] == [
        ("positive_amount", "failed", 1)]
    assert main_head(root) == (head, others) == (head, [])  # main unchanged, the run's branch gone
    assert query(root, "SELECT id, amount FROM bronze.items ORDER BY id") == [
        {"id": 1, "amount": 10}, {"id": 2, "amount": 20}]


STRATEGY_CONFIG = {
    "full_refresh": "",
    "append_only": "",
    "incremental": "-- @unique_key: id\n",
    "delete_insert": "-- @unique_key: id\n",
    "scd2": "-- @unique_key: id\n",
    "snapshot": "-- @partition_column: grp\n",
}
MOR_PIPELINE = """\
-- @merge_strategy: incremental
-- @unique_key: id
-- @landing_mode: new_files
SELECT CAST(id AS INT) AS id, CAST(val AS INT) AS val FROM {{ landing_zone('many') }}
"""


def test_every_merge_strategy_and_position_deletes_written_read_and_compacted_on_connect(server, moto, bucket,
                                                                                         tmp_path):
    # silver.many: a few changed keys of a 100-row file, merge-on-read (position deletes, read back with Spark's row
    # index), then the reaper's compaction rewrites the file without them (a write that keeps each file's layout)
    root = tmp_path / "strategies"
    files = {"ratui.yaml": settings(server.url, s3_catalog(moto, bucket), reaper={"compact_deleted_percent": 1}),
             "demo/landing/items/items_1.csv": "id,grp,val\n1,a,10\n2,a,20\n3,b,30\n",
             "demo/landing/many/many_1.csv": "id,val\n" + "".join(f"{i},{i}\n" for i in range(1, 101)),
             "demo/pipelines/silver/many/pipeline.sql": MOR_PIPELINE}
    for strategy, extra in STRATEGY_CONFIG.items():
        files[f"demo/pipelines/silver/{strategy}/pipeline.sql"] = (
            f"-- @merge_strategy: {strategy}\n-- @landing_mode: new_files\n{extra}"
            "SELECT CAST(id AS INT) AS id, grp, CAST(val AS INT) AS val FROM {{ landing_zone('items') }}\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    run_ok("--project", str(root))
    (root / "demo/landing/items/items_2.csv").write_text("id,grp,val\n2,a,25\n5,a,50\n")
    (root / "demo/landing/many/many_2.csv").write_text("id,val\n5,500\n6,600\n")
    results = {r["pipeline"].rsplit(".", 1)[1]: r for r in run_ok("--project", str(root))}
    assert {name: r["strategy"] for name, r in results.items()} == {
        **{s: s for s in STRATEGY_CONFIG}, "many": "incremental"}
    second = results["many"]
    assert second["write"]["delete_files_added"] == 1 and second["write"]["rows_deleted_by_position"] == 2, second
    (root / "demo/landing/many/many_3.csv").write_text("id,val\n7,700\n5,5000\n")
    # 7 is found in the 100-row file, which has deletes already (read without its deleted rows); 5 is now in the
    # second run's 2-row file, rewritten whole
    (third,) = run_ok("--project", str(root), "silver.many")
    assert third["write"]["rows_deleted_by_position"] == 1 and third["write"]["files_rewritten"] == 1, third

    # every table in one query (one client process): each strategy's rows, scd2's open versions, silver.many's sums
    sql = " UNION ALL ".join(
        [f"SELECT '{s}' AS t, id, grp, val FROM silver.{s}" for s in STRATEGY_CONFIG]
        + ["SELECT 'scd2_open' AS t, id, grp, val FROM silver.scd2 WHERE valid_to IS NULL",
           "SELECT 'many' AS t, count(*) AS id, CAST(count(DISTINCT id) AS STRING) AS grp, sum(val) AS val "
           "FROM silver.many"])
    got: dict[str, list] = {}
    for r in query(root, sql):
        got.setdefault(r["t"], []).append((r["id"], r["grp"], r["val"]))
    many_total = 5050 - 5 - 6 - 7 + 5000 + 600 + 700
    assert {t: sorted(rows) for t, rows in got.items()} == {
        # a rebuild reads every file of the zone, new_files or not
        "full_refresh": [(1, "a", 10), (2, "a", 20), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "append_only": [(1, "a", 10), (2, "a", 20), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "incremental": [(1, "a", 10), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "delete_insert": [(1, "a", 10), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "scd2": [(1, "a", 10), (2, "a", 20), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "snapshot": [(2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "scd2_open": [(1, "a", 10), (2, "a", 25), (3, "b", 30), (5, "a", 50)],
        "many": [(100, "100", many_total)],  # 100 rows, 100 ids
    }

    out = ratui("reap", "--project", str(root), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    compaction = json.loads(out.stdout)["tasks"]["compaction"]
    assert compaction["error"] is None and len(compaction["removed"]) == 1, compaction
    assert query(root, "SELECT count(*) AS n, count(DISTINCT id) AS ids, sum(val) AS total FROM silver.many") == [
        {"n": 100, "ids": 100, "total": many_total}]


def test_cancel_interrupts_a_running_job_and_another_run_goes_on_beside_it(server, hidden_disk, moto, bucket,
                                                                           tmp_path):
    # 120 one-second tasks on the server's 2 cores, in short tasks, so another session's job gets cores as soon as
    # a task ends (the server's FAIR pools); the last one waits at a gate the test never opens: the job cannot end
    # before the cancel, however slow or fast the machine
    project = make_slow_project(tmp_path / "slow", rows=120, parts=120, remote=server.url,
                                control=hidden_disk.folder("control"), catalog=s3_catalog(moto, bucket))
    root = str(project.root)
    project.set(version=1, delay=0, parts=2)
    run_ok("--project", root, "slow")  # version 1 on main, quickly
    for marker in project.markers.iterdir():
        marker.unlink()
    project.set(version=2, delay=1.0, parts=120, gated=1)
    slow = ratui_background("run", "--project", root, "--force", "--json", "slow", log=tmp_path / "slow.log")
    try:
        run_id = running_run(project.root, "slow", time.monotonic() + 60)
        wait_for(lambda: list(project.markers.iterdir()), 60, "a task of the slow job running on the server")
        # a second process runs another pipeline while the slow job holds the server
        began = time.monotonic()
        run_ok("--project", root, "fast")
        assert slow.poll() is None and time.monotonic() - began < 40
        head, _ = main_head(project.root)
        began = time.monotonic()
        out = ratui("cancel", "--project", root, run_id)
        assert out.returncode == 0, out.stdout + out.stderr
        slow.wait(timeout=30)
        ended = time.monotonic() - began
    finally:
        if slow.poll() is None:
            slow.kill()
    (result,) = json_lines((tmp_path / "slow.log").read_text())
    assert result["status"] == "cancelled" and result["error"]["code"] == "RAT-RUN-001", result
    assert ended < 15, ended
    assert len(project.marker_lines()) < 120  # the job did not run to its end
    assert main_head(project.root) == (head, [])
    # main as the first run left slow and as the run beside it left fast, read by the next client: the server is
    # still fine after the cancel
    assert sorted(query(project.root, "SELECT 'slow' AS t, version, count(*) AS n FROM bronze.slow GROUP BY version "
                                      "UNION ALL SELECT 'fast' AS t, NULL AS version, count(*) AS n FROM bronze.fast"),
                  key=lambda r: r["t"]) == [{"t": "fast", "version": None, "n": 100},
                                           {"t": "slow", "version": 1, "n": 120}]

    # `kill` (SIGTERM) of the `ratui run` process cancels the same way
    for marker in project.markers.iterdir():
        marker.unlink()
    slow = ratui_background("run", "--project", root, "--force", "slow", log=tmp_path / "killed.log")
    try:
        wait_for(lambda: list(project.markers.iterdir()), 60, "a task of the slow job running on the server")
        slow.send_signal(signal.SIGTERM)
        assert slow.wait(timeout=45) == 128 + signal.SIGTERM, (tmp_path / "killed.log").read_text()
    finally:
        if slow.poll() is None:
            slow.kill()
    runs = json_lines(ratui("runs", "--project", root, "--json", "--pipeline", "slow").stdout)
    (killed,) = [r for r in runs if r["id"] != run_id and r["status"] != "success"]
    killed_id = killed["id"]
    assert killed["status"] == "cancelled" and killed["error_code"] == "RAT-RUN-001", killed
    assert main_head(project.root) == (head, [])
    # nothing of either cancelled run is left in the bucket
    assert not [k for k in bucket_keys(moto, bucket) if run_id in k or killed_id in k]


IN_PLACE = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('%s') }}\n"
NEW_FILES = "-- @merge_strategy: append_only\n-- @landing_mode: new_files\nSELECT * FROM {{ landing_zone('%s') }}\n"
ARCHIVED_EVENTS = """\
-- @merge_strategy: append_only
-- @landing_mode: new_files
-- @archive_landing_zones: true
SELECT * FROM {{ landing_zone('events') }}
"""


def test_local_zones_reach_the_server_through_the_runs_staging_prefix_and_s3_zones_are_read_in_place(
        server, moto, bucket, tmp_path):
    """An S3 zone is read in place (landing.s3_read: auto), a local zone's files are uploaded under the
    warehouse's staging prefix for the run (a name Hadoop misreads under a safe one), ratui's checks read the local
    files, and the prefix is removed when the run ends, whatever its outcome."""
    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    s3_client(moto).put_object(Bucket=bucket, Key="events/a.jsonl", Body=b'{"id": 1}\n{"id": 2}\n')
    root = tmp_path / "p"
    files = {"demo/pipelines/bronze/orders/pipeline.sql": IN_PLACE % "orders",
             "demo/pipelines/bronze/bad/pipeline.sql": IN_PLACE % "bad",
             "demo/pipelines/bronze/events/pipeline.sql": ARCHIVED_EVENTS,
             "demo/pipelines/bronze/seen/pipeline.sql": NEW_FILES % "seen",
             "demo/landing/seen/a.csv": "id,name\n1,ann\n",
             "demo/landing/orders/a.csv": "id,name\n1,ann\n", "demo/landing/orders/x:[1].csv": "id,name\n2,bob\n",
             "demo/landing/bad/a.csv": "id,name\n1,ann\n2,bob,extra\n",
             "ratui.yaml": settings(server.url, s3_catalog(moto, bucket), landing={
                 "s3": {"endpoint_url": moto}, "zones": {"events": f"s3://{bucket}/events/"}})}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out = ratui("run", "--project", str(root), "--json")
    results = {r["pipeline"]: r for r in json_lines(out.stdout) if "pipeline" in r}
    assert out.returncode == 1 and results, out.stdout[-3000:] + out.stderr[-3000:]
    assert results["demo.bronze.orders"]["status"] == "success", results["demo.bronze.orders"]
    assert results["demo.bronze.events"]["status"] == "success", results["demo.bronze.events"]
    bad = results["demo.bronze.bad"]["error"]
    assert (bad["code"], bad["file"], bad["line"]) == \
        ("RAT-LND-007", str(root / "demo/landing/bad/a.csv"), 3)  # the local file, not its uploaded copy

    def run_log(run_id: str) -> str:
        shown = ratui("show", run_id, "--project", str(root))
        return shown.stdout + shown.stderr

    log = run_log(results["demo.bronze.orders"]["run_id"])
    assert f"uploaded 2 file(s), 28 B, to s3://{bucket}/lake/_ratui/staging/" in log, log
    assert "read in place" in run_log(results["demo.bronze.events"]["run_id"])
    assert results["demo.bronze.seen"]["status"] == "success", results["demo.bronze.seen"]
    # nothing new in a local zone: the zone's columns are the ones the table records, no file is uploaded for them
    again = ratui("run", "demo.bronze.seen", "--force", "--project", str(root), "--json")
    (empty,) = [r for r in json_lines(again.stdout) if "pipeline" in r]
    assert empty["status"] == "success" and empty["rows_written"] == 0, empty
    assert "uploaded" not in run_log(empty["run_id"])
    assert "no file is new: its columns are those Spark read by run " in run_log(empty["run_id"])
    assert not [k for k in bucket_keys(moto, bucket) if "/_ratui/staging/" in k]  # every run removed its prefix
    events_run = results["demo.bronze.events"]["run_id"]
    assert f"events/_processed/{events_run}/a.jsonl" in bucket_keys(moto, bucket, "events/")
    project = load_settings(root)
    catalog = open_catalog(catalog_config(project.catalog), project.db_path, root)
    orders = catalog.load_table("main", "demo.bronze.orders").scan().to_arrow()
    assert sorted(orders.column("id").to_pylist()) == [1, 2]


PRINTS_COLUMNS = """\
# @merge_strategy: append_only
# @landing_mode: new_files
# @isolation: none
from pyspark.sql import functions as F


def run(ctx):
    df = ctx.landing_zone("%s")
    print("columns " + df.schema.json())  # the Spark types the pipeline gets, in its run's log
    # a nested column is stored as its JSON text
    return df.select([F.to_json(f.name).alias(f.name) if f.dataType.typeName() in ("struct", "array") else f.name
                      for f in df.schema.fields])
"""
FILTERED = "-- @merge_strategy: append_only\n-- @landing_mode: new_files\nSELECT * FROM {{ landing_zone('quiet') }} " \
           "WHERE id < 0\n"


def test_a_local_zone_with_nothing_new_uploads_nothing_and_its_empty_batch_keeps_the_zones_columns(
        server, moto, bucket, tmp_path):
    """Issue 47: a zone of CSV, JSON or Parquet files with no new file, on a Spark that cannot see this disk: the
    run uploads nothing to its staging prefix (counted while the run is held at its write phase, after every read)
    and ends as it always did: success, 0 rows, 'the batch was empty: nothing appended', the table as it was, and
    the pipeline given the zone's columns with the Spark types of the run that read its rows. A table that records
    no columns of the zone (its only run wrote no snapshot) still gets them from the newest loaded file, uploaded
    for that, and the run's log says why."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    root = tmp_path / "p"
    parquet = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "price": pa.array([1.25, 2.5], pa.float32()),
                             "at": pa.array([1_700_000_000_000_000, None], pa.timestamp("us", tz="UTC")),
                             "tags": [["a"], []]}), parquet)
    files = {"demo/landing/csvz/a.csv": "id,amount,day,name\n1,1.5,2025-01-02,ann\n2,2,2025-01-03,bob\n",
             "demo/landing/jsonz/a.jsonl": '{"id": 1, "geo": {"lat": 1.5, "lon": 2}, "tags": ["x"]}\n'
                                          '{"id": 2, "geo": {"lat": 3.0, "lon": 4}, "tags": []}\n',
             "demo/landing/quiet/a.csv": "id,name\n1,ann\n",
             "demo/pipelines/bronze/quiet/pipeline.sql": FILTERED,
             "demo/pipelines/bronze/csvz/tests/quality/keys.sql": "SELECT * FROM {{ this }} WHERE id IS NULL\n",
             "ratui.yaml": settings(server.url, s3_catalog(moto, bucket))}
    for zone in ("csvz", "jsonz", "parqz"):
        files[f"demo/pipelines/bronze/{zone}/pipeline.py"] = PRINTS_COLUMNS % zone
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "demo/landing/parqz").mkdir(parents=True)
    (root / "demo/landing/parqz/a.parquet").write_bytes(parquet.getvalue())
    pipelines = [f"demo.bronze.{name}" for name in ("csvz", "jsonz", "parqz", "quiet")]

    def log_of(run_id: str) -> str:
        shown = ratui("show", run_id, "--project", str(root))
        return shown.stdout + shown.stderr

    def columns_printed(log: str) -> str:
        (line,) = [line for line in log.splitlines() if "print: columns " in line]
        return line.split("print: columns ", 1)[1]

    def table_state(key: str) -> tuple:
        project = load_settings(root)
        catalog = open_catalog(catalog_config(project.catalog), project.db_path, root)
        table = catalog.load_table("main", key)
        return table.metadata.current_snapshot_id, str(table.schema()), table.scan().to_arrow().num_rows

    first = {r["pipeline"]: r for r in run_ok("--project", str(root))}
    assert sorted(first) == pipelines
    read = {key: columns_printed(log_of(first[key]["run_id"])) for key in pipelines[:3]}
    assert '"type":"date"' in read["demo.bronze.csvz"] and '"type":"timestamp"' in read["demo.bronze.parqz"]
    assert '"name":"geo"' in read["demo.bronze.jsonz"]
    before = {key: table_state(key) for key in pipelines}
    assert [before[key][2] for key in pipelines] == [2, 2, 2, 0]

    for key in pipelines:
        gate = tmp_path / f"gate-{key}"
        out = tmp_path / f"{key}.log"
        held = ratui_background("run", "--project", str(root), "--force", "--json", key, log=out,
                                env={"RATUI_FAILPOINT": f"hold:write:{key}", "RATUI_FAILPOINT_GATE": str(gate)})
        try:
            wait_for(lambda reached=tmp_path / f"gate-{key}.reached", run=held: reached.exists() or
                     run.poll() is not None, 180, f"{key}'s run at its write phase")
            assert held.poll() is None, out.read_text()[-3000:]
            staged = [k for k in bucket_keys(moto, bucket) if "/_ratui/staging/" in k]  # the zone is read by now
            gate.touch()
            held.wait(timeout=180)
        finally:
            if held.poll() is None:
                held.kill()
        (result,) = [r for r in json_lines(out.read_text()) if "status" in r]
        assert (result["status"], result["rows_written"], result["notes"]) == (
            "success", 0, ["the batch was empty: nothing appended"]), result
        assert table_state(key) == before[key]
        assert [(q["test"], q["status"]) for q in result["quality"]] == (
            [("keys", "passed")] if key == "demo.bronze.csvz" else []), result["quality"]
        log = log_of(result["run_id"])
        if key == "demo.bronze.quiet":
            # the first run's result was empty: no snapshot, so no columns recorded; the newest loaded file is
            # uploaded for them, and the log says why
            assert staged == [f"lake/_ratui/staging/{result['run_id']}/landing/quiet/a.csv"], staged
            assert "uploaded 1 file(s), 14 B, to s3://" in log, log
            assert ("(no file is new and the table records none of the zone's columns: Spark reads them from the "
                    "newest loaded file, none of its rows)") in log, log
            continue
        assert staged == [], (key, staged)
        assert "uploaded" not in log, log
        assert (f"no file is new: its columns are those Spark read by run {first[key]['run_id']} at ") in log, log
        assert columns_printed(log) == read[key]  # the same Spark types as the run that read the rows
    assert not [k for k in bucket_keys(moto, bucket) if "/_ratui/staging/" in k]


def listening_addresses(pgid: int) -> list[str]:
    """The local address of every TCP socket the processes of a process group listen on ("127.0.0.1", "::1", ...)."""
    import ipaddress
    import os

    inodes: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:  # a process that ended meanwhile
            continue
    found = []
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                raw = bytes.fromhex(fields[1].split(":")[0])
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))  # each 32-bit word little-endian
                address = ipaddress.ip_address(words)
                found.append(str(getattr(address, "ipv4_mapped", None) or address))  # ::ffff:127.0.0.1 as 127.0.0.1
    return found


def test_a_server_started_as_the_docs_say_listens_on_loopback_only(server):
    """docs/team/spark.md: the gRPC port, the driver's and every other port of the server's processes on 127.0.0.1
    (tests/servers.py started it by the page's own script)."""
    addresses = wait_for(lambda: listening_addresses(server.process.pid), 30, "the server's listening sockets")
    assert addresses and all(a in ("127.0.0.1", "::1") for a in addresses), addresses
    assert len(addresses) >= 2  # the Connect port and the driver's own: the UI would be a third, and it is off


def test_a_server_without_one_of_s3as_jars_names_the_class_and_the_jar(hidden_disk, moto, bucket, tmp_path):
    """The docs' server with one jar of the connector left out (the analytics accelerator, which an older page did
    not name): the run fails with RAT-S3-005 naming the class the server could not load and the jar that carries
    it, not RAT-RUN-002 ("a bug in ratui"); main unchanged."""
    lacking = start_connect(hidden_disk.folder("connect-lacking"), disk=hidden_disk,
                            without=("analyticsaccelerator-s3",))
    try:
        root = tmp_path / "lacking"
        files = {"ratui.yaml": settings(lacking.url, s3_catalog(moto, bucket)),
                 "demo/landing/items/items.csv": "id,amount\n1,10\n2,20\n",
                 "demo/pipelines/bronze/items/pipeline.sql": GATE_PIPELINE}
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        out = ratui("run", "--project", str(root), "--json")
        (result,) = json_lines(out.stdout)
        assert out.returncode == 1 and result["status"] == "failed", result
        error = result["error"]
        assert error["code"] == "RAT-S3-005", error
        assert "software.amazon.s3.analyticsaccelerator." in error["message"], error
        assert "analyticsaccelerator-s3-1.3.1.jar" in error["message"], error
        assert "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1" in error["hint"], error
        assert main_head(root)[1] == []  # no branch left; main holds nothing of the run
        assert bucket_keys(moto, bucket, "lake/demo/warehouse/bronze/items/metadata/") == []
    finally:
        lacking.stop()


@pytest.mark.parametrize("point", ["quality", "test:not_null_keys"])
def test_a_server_stopped_during_the_quality_phase_is_spark_unreachable_not_failed_quality(server, moto, bucket,
                                                                                          tmp_path, point):
    """SIGTERM to the server while the run is held in its quality phase (as it starts, before the table's view; or
    with the view registered, as the first test is prepared): the run fails with RAT-SPK-001 (Spark unreachable),
    its tests are recorded `not_run` with that error, never `error` nor RAT-RUN-003 with the hint that a test found
    violations; main as it was. (It stops the module's server: the next test gets a new one.)"""
    root = tmp_path / "held"
    files = {"ratui.yaml": settings(server.url, s3_catalog(moto, bucket), spark={"remote": server.url,
                                                                                 "connect_retry_seconds": 3}),
             "demo/landing/items/items.csv": "id,amount\n1,10\n2,20\n",
             "demo/pipelines/bronze/items/pipeline.sql": GATE_PIPELINE,
             "demo/pipelines/bronze/items/tests/quality/not_null_keys.sql":
                 "-- @severity: error\nSELECT * FROM {{ this }} WHERE id IS NULL\n",
             "demo/pipelines/bronze/items/tests/quality/positive_amount.sql":
                 "-- @severity: warn\nSELECT * FROM {{ this }} WHERE amount <= 0\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    gate = tmp_path / "gate"
    log = tmp_path / "held.log"
    held = ratui_background("run", "--project", str(root), "--json", log=log,
                            env={"RATUI_FAILPOINT": f"hold:{point}", "RATUI_FAILPOINT_GATE": str(gate)})
    try:
        wait_for(lambda: (tmp_path / "gate.reached").exists() or held.poll() is not None, 300,
                 "the run at its quality phase")
        assert held.poll() is None, log.read_text()[-3000:]
        server.stop()  # SIGTERM to the server's processes (SIGKILL only to what is left after 15 s)
        gate.touch()
        held.wait(timeout=180)
    finally:
        if held.poll() is None:
            held.kill()
    (result,) = [r for r in json_lines(log.read_text()) if "status" in r]
    assert held.returncode == 1 and result["status"] == "failed", result
    assert result["error"]["code"] == "RAT-SPK-001", result["error"]
    assert "violations" not in (result["error"]["hint"] or ""), result["error"]
    assert [(q["test"], q["status"]) for q in result["quality"]] == [
        ("not_null_keys", "not_run"), ("positive_amount", "not_run")], result["quality"]
    assert all(q["error"].startswith("RAT-SPK-001 ") for q in result["quality"])
    assert main_head(root)[1] == []
    shown = ratui("show", result["run_id"], "--project", str(root))
    assert "not_run" in shown.stdout and "RAT-RUN-003" not in shown.stdout, shown.stdout[-3000:]


def test_a_server_gone_mid_run_fails_the_run_cleanly(server, hidden_disk, moto, bucket, tmp_path):
    # the module's server, killed while a job runs on it (the last test of the module: a test after it would get
    # a new server)
    # calls give up after about 4 s of retries (spark.connect_retry_seconds: 3) rather than the default 44
    project = make_slow_project(tmp_path / "slow", rows=60, parts=60, remote=server.url,
                                control=hidden_disk.folder("control"), catalog=s3_catalog(moto, bucket),
                                spark_settings={"connect_retry_seconds": 3})
    root = str(project.root)
    project.set(version=1, delay=0, parts=2)
    run_ok("--project", root, "slow")  # version 1 on main
    head = main_head(project.root)
    for marker in project.markers.iterdir():
        marker.unlink()
    project.set(version=2, delay=1.0, parts=60, gated=1)  # its last task waits at a gate: the job cannot end first
    slow = ratui_background("run", "--project", root, "--force", "--json", "slow", log=tmp_path / "slow.log")
    try:
        wait_for(lambda: list(project.markers.iterdir()), 90, "a task of the slow job running on the server")
        server.kill()
        began = time.monotonic()
        slow.wait(timeout=120)
        ended = time.monotonic() - began
    finally:
        if slow.poll() is None:
            slow.kill()
    (result,) = json_lines((tmp_path / "slow.log").read_text())
    # a coded error once the project's retry bound is spent, not after the Connect client's own ten minutes
    assert slow.returncode == 1 and result["status"] == "failed" and result["error"]["code"] == "RAT-SPK-001", result
    assert result["error"]["message"].startswith("Spark Connect server unreachable (UNAVAILABLE)"), result
    assert ended < 40, ended  # the default bound (44 s of retries per call) could not end it this soon
    # main as it was, and no branch left: the catalog is ratui's own (SQLite), not the server's
    assert main_head(project.root) == head
