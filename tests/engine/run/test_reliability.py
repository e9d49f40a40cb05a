"""Nothing lost: killed processes, cancellation at every phase and from another process, concurrent runs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
import os
import subprocess
import sys
import threading
import time

import pytest

from ratui.engine.events import LogLine, PhaseStarted
from ratui.engine.vocabulary import PHASES
from ratui.engine.facade.engine import Engine
from ratui.engine.run.record import RunRecord

PIPELINES = {
    "demo/pipelines/bronze/full/pipeline.sql": (
        "-- @merge_strategy: full_refresh\nSELECT id, id * 2 AS v FROM range(0, 50) AS t(id)\n"),
    "demo/pipelines/bronze/inc/pipeline.sql": (
        "-- @merge_strategy: incremental\n-- @unique_key: id\nSELECT id, id * 3 AS v FROM range(0, 50) AS t(id)\n"),
    "demo/pipelines/bronze/app/pipeline.sql": (
        "-- @merge_strategy: append_only\nSELECT id, 'x' AS v FROM range(0, 10) AS t(id)\n"),
}
for _name in ("full", "inc", "app"):
    PIPELINES[f"demo/pipelines/bronze/{_name}/tests/quality/ids.sql"] = "SELECT * FROM {{ this }} WHERE id IS NULL\n"


def q(engine, sql):
    columns, rows, _ = engine.query(sql)
    return [dict(zip(columns, r)) for r in rows]


def refs(engine):
    return [r.name for r in engine.state.catalog.list_refs()]


def main_bytes(engine) -> dict[str, str]:
    """Every file main's tables are read from (each table's metadata, its current snapshot's manifest list and
    manifests, their live data and delete files), by path, with a SHA-256 of its bytes."""
    import hashlib

    found: dict[str, str] = {}
    for key in engine.state.catalog.table_pointers("main"):
        table = engine.state.catalog.load_table("main", key)
        paths = [table.metadata_location]
        snapshot = table.current_snapshot()
        if snapshot is not None:
            paths.append(snapshot.manifest_list)
            for manifest in snapshot.manifests(table.io):
                paths.append(manifest.manifest_path)
                paths += [e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io)]
        for path in paths:
            with table.io.new_input(path).open() as f:
                found[path] = hashlib.sha256(f.read()).hexdigest()
    return found


@pytest.fixture(scope="module")
def killed_project(tmp_path_factory, spark):
    from tests.conftest import TEST_SETTINGS, write_files

    root = tmp_path_factory.mktemp("kill") / "proj"
    root.mkdir()
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo"))
    write_files(root, PIPELINES)
    engine = Engine.open(root)
    assert all(r.status == "success" for r in engine.run(engine.compile().select([])))
    return root


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("pipeline", ["full", "inc", "app"])
def test_sigkill_at_each_phase_leaves_main_byte_for_byte(killed_project, pipeline, phase):
    engine = Engine.open(killed_project)
    before = engine.state.catalog.table_pointers("main")
    files_before = main_bytes(engine)
    assert len(files_before) >= 3 * 4  # three tables: metadata, manifest list, a manifest and a data file at least
    env = dict(os.environ, RATUI_FAILPOINT=f"kill:{phase}")
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", f"bronze.{pipeline}", "--force", "--project",
                           str(killed_project)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert engine.state.catalog.table_pointers("main") == before  # same metadata location for every table
    (stale,) = [r for r in engine.state.history.list_runs(5) if r["status"] == "running"]
    assert stale["pipeline"] == f"demo.bronze.{pipeline}"
    # the next ratui start notices the dead process: the run fails and its branch goes
    again = Engine.open(killed_project)
    assert again.recover() == [stale["id"]]
    record = again.state.history.get_run(stale["id"])
    assert record["status"] == "failed" and record["error_code"] == "RAT-RUN-006"
    assert refs(again) == ["main"]
    assert again.state.catalog.table_pointers("main") == before
    assert main_bytes(again) == files_before  # the same files, each with the same bytes


def test_reaper_sweeps_what_the_killed_runs_left_and_nothing_else(killed_project):
    """After the kills above, the orphan-file sweep removes the orphaned files; main reads exactly as before."""

    # one more kill after a write, so there are orphans even when this test runs alone
    env = dict(os.environ, RATUI_FAILPOINT="kill:quality")
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "bronze.inc", "--force", "--project",
                           str(killed_project)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9
    engine = Engine.open(killed_project)
    engine.recover()  # as the next ratui start does: the dead run fails and its branch goes
    counts = {t: q(engine, f"SELECT count(*) AS n, sum(v) AS s FROM bronze.{t}") if t != "app" else
              q(engine, "SELECT count(*) AS n FROM bronze.app") for t in ("full", "inc", "app")}
    warehouse = killed_project / "demo" / "warehouse"
    old = time.time() - 3 * 24 * 3600
    for path in warehouse.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))
    before = {p for p in warehouse.rglob("*") if p.is_file()}
    # the killed runs' branches were deleted just now: their files stay for the snapshot retention window (a branch
    # deleted inside it counts as live, ops/orphans.py), so the sweep runs as 8 days later
    later = datetime.now(timezone.utc) + timedelta(days=8)
    report = engine.reaper(clock=lambda: later).run(dry_run=False, tasks=["orphan_files"])
    task = report.tasks["orphan_files"]
    assert task.error is None and task.removed, "the killed runs left orphan files to sweep"
    after = {p for p in warehouse.rglob("*") if p.is_file()}
    assert len(before - after) == len(task.removed)
    for key in engine.state.catalog.table_pointers("main"):
        table = engine.state.catalog.load_table("main", key)
        for entry in table.metadata.metadata_log:
            assert os.path.exists(entry.metadata_file)
        for f in table.scan().plan_files():
            assert os.path.exists(f.file.file_path)
    again = {t: q(engine, f"SELECT count(*) AS n, sum(v) AS s FROM bronze.{t}") if t != "app" else
             q(engine, "SELECT count(*) AS n FROM bronze.app") for t in ("full", "inc", "app")}
    assert again == counts
    assert all(r.status == "success" for r in engine.run(engine.compile().select([]), force=True))


def test_an_atomic_publish_killed_midway_leaves_main_byte_for_byte(killed_project):
    """Two of three pipelines merged into the publish branch, the process killed while the third writes: main
    is as it was (pointers and metadata bytes), recovery fails the run, and the kept publish branch is reaped."""
    from datetime import datetime, timedelta, timezone

    engine = Engine.open(killed_project)
    order = engine.compile().select([])
    before = engine.state.catalog.table_pointers("main")
    raw = {key: open(loc.removeprefix("file://"), "rb").read() for key, loc in before.items()}
    head = engine.state.catalog.get_ref("main").head
    env = dict(os.environ, RATUI_FAILPOINT=f"kill:write:{order[-1]}")
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "--atomic", "--force", "--project",
                           str(killed_project)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert engine.state.catalog.table_pointers("main") == before
    assert {key: open(loc.removeprefix("file://"), "rb").read() for key, loc in before.items()} == raw
    assert engine.state.catalog.get_ref("main").head == head
    (publish,) = [r for r in refs(engine) if r.startswith("publish-")]
    merged = {e.pipeline for e in engine.log(publish, limit=5) if e.kind == "run" and e.ref == publish}
    assert merged == set(order[:-1])  # the first two did land on the publish branch, and only there

    again = Engine.open(killed_project)
    (dead,) = again.recover()
    assert again.state.history.get_run(dead)["pipeline"] == order[-1]
    later = datetime.now(timezone.utc) + timedelta(hours=7)
    report = again.reaper(clock=lambda: later).run(tasks=["orphan_branches"])
    assert [i["name"] for i in report.tasks["orphan_branches"].removed] == [publish]
    assert refs(again) == ["main"] and again.state.catalog.table_pointers("main") == before


def test_kill_after_the_merge_committed_counts_as_success(make_project, spark):
    """The merge is one SQLite transaction that also stamps the run: recovery then knows it landed."""
    root = make_project({"demo/pipelines/bronze/t/pipeline.sql": "SELECT 1 AS id\n"})
    engine = Engine.open(root)
    keys = engine.compile().select([])
    [result] = engine.run([keys[0]])
    run_id = result.run_id
    # simulate a process that died right after its merge: the stamp is there, the status is not final
    RunRecord(engine.state.history).update(run_id, status="running", pid=2 ** 22 + 12345)
    again = Engine.open(root)
    assert run_id in again.recover()
    assert again.state.history.get_run(run_id)["status"] == "success"


@pytest.mark.parametrize("phase", PHASES)
def test_cancel_at_each_phase(make_project, spark, phase):
    root = make_project(PIPELINES)
    engine = Engine.open(root)
    engine.run(engine.compile().select(["bronze.inc"]))
    before = engine.state.catalog.table_pointers("main")

    def on_event(event):
        if isinstance(event, PhaseStarted) and event.phase == phase:
            assert engine.cancel(event.run_id) == "requested"

    engine.subscribe(on_event)
    (result,) = engine.run(engine.compile().select(["bronze.inc"]), force=True)
    assert result.status == "cancelled" and result.error["code"] == "RAT-RUN-001"
    assert engine.state.catalog.table_pointers("main") == before
    assert refs(engine) == ["main"]
    assert list(result.phases)[-1] == phase
    assert engine.state.history.get_run(result.run_id)["phase_status"][phase] == "cancelled"


def test_cancel_during_a_quality_test(make_project, spark):
    files = dict(PIPELINES)
    files["demo/pipelines/bronze/inc/tests/quality/slow.sql"] = (
        "SELECT a.id FROM range(0, 40000000) a CROSS JOIN range(0, 30) b WHERE a.id * b.id = -1\n")
    root = make_project(files)
    engine = Engine.open(root)
    started = threading.Event()
    engine.subscribe(lambda e: started.set() if isinstance(e, PhaseStarted) and e.phase == "quality" else None)
    keys = engine.compile().select(["bronze.inc"])
    invocation = engine.start([keys[0]], trigger="cli")
    run_id = invocation.run_ids[0]
    box = {}
    worker = threading.Thread(target=lambda: invocation.wait() and box.update(r=invocation.results[0]))
    worker.start()
    assert started.wait(120)
    from ratui.engine.spark import jobs  # the slow quality test's Spark job running (the run's job group)

    deadline = time.monotonic() + 120
    while not (jobs.progress(run_id) or {}).get("jobs_running"):
        assert time.monotonic() < deadline and worker.is_alive(), "the quality test's job never ran"
        time.sleep(0.05)
    assert engine.cancel(run_id) == "requested"
    worker.join(60)
    assert box["r"].status == "cancelled"
    assert engine.state.catalog.table_pointers("main") == {} and refs(engine) == ["main"]


# in ratui's own process (isolation: none): an isolated one is killed whole (tests/engine/isolation)
STUCK_PYTHON = {
    "": ("# @merge_strategy: full_refresh\n# @isolation: none\ndef run(ctx):\n    print('spinning')\n"
         "    while True:\n        pass\n"),
    "swallowing": ("# @merge_strategy: full_refresh\n# @isolation: none\ndef run(ctx):\n    print('spinning')\n"
                   "    while True:\n        try:\n            sum(range(1000))\n        except Exception:\n"
                   "            pass\n"),
}


@pytest.mark.parametrize("kind", sorted(STUCK_PYTHON))
def test_cancel_stops_python_code_that_never_reaches_a_checkpoint(make_project, spark, kind):
    """A Python pipeline spinning in its own code (`while True: pass`, or a loop that swallows every Exception)
    is interrupted by a cancel between two bytecodes: the run ends cancelled within seconds, main unchanged, and
    the thread that ran it is free again (the next run of the same process works)."""
    root = make_project({"demo/pipelines/bronze/stuck/pipeline.py": STUCK_PYTHON[kind],
                         "demo/pipelines/bronze/fine/pipeline.sql": "SELECT 1 AS id\n"})
    engine = Engine.open(root)
    spinning = threading.Event()  # its print reached the run's log: it is inside run(ctx), never to leave
    engine.subscribe(lambda e: spinning.set() if isinstance(e, LogLine) and e.message == "print: spinning" else None)
    invocation = engine.start(engine.compile().select(["bronze.stuck"]), trigger="cli")
    run_id = invocation.run_ids[0]
    assert spinning.wait(120)
    began = time.monotonic()
    assert engine.cancel(run_id) == "requested"
    assert invocation.wait(15), "the Python code was not interrupted"
    print(f"\ncancelled {kind or 'plain'} spinning Python in {time.monotonic() - began:.2f}s")
    (result,) = invocation.results
    assert result.status == "cancelled" and result.error["code"] == "RAT-RUN-001", result.error
    assert engine.state.history.get_run(run_id)["phase_status"]["build"] == "cancelled"
    assert engine.state.catalog.table_pointers("main") == {} and refs(engine) == ["main"]
    (after,) = engine.run(engine.compile().select(["bronze.fine"]))
    assert after.status == "success"


def test_cancel_from_another_process(tmp_path, spark):
    """`ratui cancel` from this process stops a run of another one in the middle of its Spark job: the job's tasks
    wait at a gate that is never opened (tests/servers.py), so the run ends only if the cancel reaches them."""
    from tests.servers import make_slow_project, running_run, wait_for

    project = make_slow_project(tmp_path / "slow", rows=8, parts=4, master="local[2]")
    project.set(version=1, delay=0, gated=4)
    root = project.root
    proc = subprocess.Popen([sys.executable, "-m", "ratui", "run", "--project", str(root), "bronze.slow"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        engine = Engine.open(root)
        run_id = running_run(root, "demo.bronze.slow", time.monotonic() + 180)
        wait_for(lambda: list(project.markers.iterdir()), 180, "a task of the run's Spark job, at the gate")
        from ratui.cli import main as cli_main

        assert cli_main(["cancel", run_id, "--project", str(root), "--wait", "60"]) == 0
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, out + err
        record = engine.state.history.get_run(run_id)
        assert record["status"] == "cancelled"
        assert engine.state.catalog.table_pointers("main") == {} and refs(engine) == ["main"]
        assert cli_main(["cancel", run_id, "--project", str(root)]) == 1  # already finished
    finally:
        if proc.poll() is None:
            proc.kill()


def _concurrent_project(make_project, name):
    files = {}
    for i in range(4):
        strategy = ["append_only", "append_only", "incremental", "full_refresh"][i]
        key = "-- @unique_key: id\n" if strategy == "incremental" else ""
        files[f"demo/pipelines/bronze/t{i}/pipeline.sql"] = (
            f"-- @merge_strategy: {strategy}\n{key}SELECT id, id + {i} AS v FROM range(0, 1000) AS t(id)\n")
    return make_project(files, name=name)


def test_eight_concurrent_runs_over_four_tables_match_serial(make_project, spark):
    serial_root = _concurrent_project(make_project, "serial")
    serial = Engine.open(serial_root)
    keys = serial.compile().select([])
    for _ in range(2):
        assert all(r.status == "success" for r in serial.run(keys, force=True))

    root = _concurrent_project(make_project, "concurrent")
    engine = Engine.open(root)
    run_ids = [engine.start([key], force=True).run_ids[0] for key in keys for _ in range(2)]
    for run_id in run_ids:
        assert engine.wait(run_id, 300)
    statuses = [engine.state.history.get_run(r)["status"] for r in run_ids]
    assert statuses == ["success"] * 8
    for key in keys:
        table = key.split(".", 1)[1]
        sql = f"SELECT id, v, count(*) AS n FROM {table} GROUP BY id, v ORDER BY id, v"
        assert q(engine, sql) == q(serial, sql), table
    assert refs(engine) == ["main"]
