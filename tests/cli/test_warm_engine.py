"""The warm engine through the installed command line, as a user meets it: the first command starts it, the next
ones run in it with the same output and exit codes, Ctrl-C stops only its own command, a killed engine loses no
row of main and is replaced, a changed environment gets a fresh engine, a folder that is not private is not used,
and another user is refused.

Every engine here lives in the test's own folder (RATUI_ENGINE_DIR) and is stopped at the end of its test; the
rest of the suite runs with RATUI_WARM=0 (tests/conftest.py), so no test leaves an engine behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TEST_SETTINGS
from tests.warm_engines import engine_pids

BOUND = 180.0  # seconds: a JVM starting on a busy 2-core machine


def wait_for(condition, what: str, bound: float = BOUND):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {bound:.0f} s: {what}")


class Warm:
    """A project and the environment that lets its commands run warm, in a folder of the test's own."""

    def __init__(self, root: Path, engines: Path) -> None:
        self.root = root
        self.engines = engines
        self.env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
        self.env.update({"RATUI_WARM": "1", "RATUI_ENGINE_DIR": str(engines)})

    def ratui(self, *args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(self.root)],
                              capture_output=True, text=True, timeout=timeout, env={**self.env, **(env or {})},
                              stdin=subprocess.DEVNULL)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "ratui", *args, "--project", str(self.root)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
                                stdin=subprocess.DEVNULL)

    def status(self) -> dict | None:
        out = self.ratui("engine", "status", "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["engine"]

    def ready(self) -> dict:
        """The engine's status once it is warm: its Spark started and the project opened (the end of its warm-up;
        CI once saw a command with a changed environment, sent while the warm-up still ran under load, find no
        engine to replace)."""
        return wait_for(lambda: (s := self.status()) and s.get("spark") and s.get("engines_open") and s,
                        "the engine's Spark started and its project opened")

    def runs(self) -> list[dict]:
        out = self.ratui("runs", "--json", "--limit", "50")
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        self.ratui("engine", "stop")
        for pid in engine_pids(self.engines):  # whatever a failed test left
            os.kill(pid, signal.SIGKILL)


def warm_project(make_project, tmp_path) -> Warm:
    """Two pipelines (bronze.numbers: 5 rows, silver.evens) and a folder for their engine."""
    root = make_project({
        "demo/pipelines/bronze/numbers/pipeline.sql": "SELECT id, id * 2 AS twice FROM range(5)",
        "demo/pipelines/silver/evens/pipeline.sql": "SELECT id FROM {{ ref('bronze.numbers') }} WHERE id % 2 = 0",
    })
    return Warm(root, tmp_path / "engines")


@pytest.fixture
def warm(make_project, tmp_path):
    project = warm_project(make_project, tmp_path)
    yield project
    project.stop()


def test_the_next_commands_run_in_the_engine_with_the_same_output_and_codes(warm):
    first = warm.ratui("run")
    assert first.returncode == 0, first.stderr
    assert "warm engine starts beside this command" in first.stderr
    engine = warm.ready()

    warm_run = warm.ratui("run", "bronze.numbers", "--force", "--json")
    assert warm_run.returncode == 0, warm_run.stderr
    (result,) = [json.loads(line) for line in warm_run.stdout.splitlines() if '"pipeline"' in line]
    assert result["status"] == "success" and result["rows_written"] == 5
    latest = warm.runs()[0]
    assert latest["id"] == result["run_id"] and latest["pid"] == engine["pid"]  # run by the engine, as the CLI's
    assert latest["trigger"] == "cli"
    assert warm.status()["commands_served"] == 1

    sql = "SELECT COUNT(*) AS n, SUM(twice) AS s FROM bronze.numbers"
    warm_query, cold_query = warm.ratui("query", sql), warm.ratui("query", sql, "--no-warm")
    assert warm_query.returncode == cold_query.returncode == 0
    assert warm_query.stdout == cold_query.stdout and "20" in warm_query.stdout

    # a usage error and a failing command: the same code and the same coded error as without the engine
    for args in (("run", "nosuch"), ("query", "SELECT * FROM bronze.nosuch")):
        hot, cold = warm.ratui(*args), warm.ratui(*args, "--no-warm")
        assert hot.returncode == cold.returncode != 0, (hot.stderr, cold.stderr)
        code = cold.stderr.split("]", 1)[0]
        assert code.startswith("error[RAT-") and code in hot.stderr
    assert warm.status()["pid"] == engine["pid"]  # one engine served them all


def test_ctrl_c_cancels_its_own_command_only_and_main_keeps_its_rows(warm, make_project):
    make_project({"demo/pipelines/gold/slow/pipeline.sql":
                  "SELECT COUNT(*) AS n FROM range(0, 400000000000, 1, 40000) a"})
    assert warm.ratui("run", "bronze.numbers", "silver.evens").returncode == 0
    warm.ready()
    slow = warm.popen("run", "gold.slow")
    wait_for(lambda: any(r["pipeline"].endswith("gold.slow") and r["status"] == "running" for r in warm.runs()),
             "gold.slow running in the engine")
    other = warm.ratui("run", "bronze.numbers", "--force")  # a second command at once: it runs, and succeeds
    assert other.returncode == 0, other.stderr
    slow.send_signal(signal.SIGINT)
    out, err = slow.communicate(timeout=BOUND)
    assert slow.returncode == 130, err
    assert "cancelling the runs in flight" in err
    runs = warm.runs()
    assert next(r for r in runs if r["pipeline"].endswith("gold.slow"))["status"] == "cancelled"
    assert next(r for r in runs if r["pipeline"].endswith("bronze.numbers"))["status"] == "success"
    listed = warm.ratui("query", "SHOW TABLES IN gold")
    assert "slow" not in listed.stdout  # main never got the cancelled run's table
    assert warm.status() is not None  # the engine lives on


def test_an_engine_killed_mid_run_leaves_main_as_it_was_and_is_replaced(warm, make_project):
    make_project({"demo/pipelines/gold/slow/pipeline.sql":
                  "SELECT COUNT(*) AS n FROM range(0, 400000000000, 1, 40000) a"})
    assert warm.ratui("run", "bronze.numbers").returncode == 0
    engine = warm.ready()
    slow = warm.popen("run", "gold.slow")
    wait_for(lambda: any(r["pipeline"].endswith("gold.slow") and r["status"] == "running" for r in warm.runs()),
             "gold.slow running in the engine")
    os.kill(engine["pid"], signal.SIGKILL)
    out, err = slow.communicate(timeout=BOUND)
    assert slow.returncode == 1 and "RAT-ENG-004" in err and "main is unchanged" in err
    after = warm.ratui("run", "bronze.numbers", "--force")  # no hang on the dead engine's socket
    assert after.returncode == 0, after.stderr
    slow_run = next(r for r in warm.runs() if r["pipeline"].endswith("gold.slow"))
    assert slow_run["status"] == "failed"  # recorded by the next command's recovery
    assert "slow" not in warm.ratui("query", "SHOW TABLES IN gold").stdout
    new = warm.ready()
    assert new["pid"] != engine["pid"]


def test_a_changed_environment_gets_a_fresh_engine_and_its_values_are_never_said(warm):
    assert warm.ratui("run").returncode == 0
    engine = warm.ready()
    changed = warm.ratui("run", "bronze.numbers", "--force", env={"RATUI_TEST_SECRET_TOKEN": "hunter2-value"})
    assert changed.returncode == 0, changed.stderr
    log = "\n".join(path.read_text(errors="replace")[-3000:] for path in sorted(warm.engines.glob("*.log*")))
    assert "replaced" in changed.stderr and "RATUI_TEST_SECRET_TOKEN" in changed.stderr, \
        f"stderr:\n{changed.stderr}\nthe engines' log:\n{log}"  # CI saw this fail under load, not understood yet
    assert "hunter2-value" not in changed.stderr + changed.stdout
    wait_for(lambda: engine["pid"] not in engine_pids(warm.engines), "the old engine gone")


def test_a_folder_that_is_not_private_is_not_used(warm):
    warm.engines.mkdir(mode=0o755)
    os.chmod(warm.engines, 0o755)
    out = warm.ratui("run")
    assert out.returncode == 0, out.stderr  # run in its own process
    assert "RAT-ENG-001" in out.stderr and "not private" in out.stderr and "mode 0755" in out.stderr
    assert not list(warm.engines.glob("*.sock"))


def test_another_user_is_refused(warm):
    import shutil
    import tempfile

    # the engines' folder where another user could reach it if its mode allowed (the test's own tmp is closed)
    warm.engines = Path(tempfile.mkdtemp(prefix="ratui-engines-", dir="/tmp"))
    warm.env["RATUI_ENGINE_DIR"] = str(warm.engines)
    try:
        assert warm.ratui("run").returncode == 0
        warm.ready()
        (socket_file,) = warm.engines.glob("*.sock")
        probe = ("import socket, os, sys; os.setgid(65534); os.setuid(65534); s = socket.socket(socket.AF_UNIX); "
                 "s.connect(sys.argv[1])")
        denied = subprocess.run([sys.executable, "-c", probe, str(socket_file)], capture_output=True, text=True)
        assert denied.returncode != 0 and "PermissionError" in denied.stderr  # the private folder keeps them out
        # and should the folder and socket be opened to them, the engine itself refuses another uid
        os.chmod(warm.engines, 0o711)
        os.chmod(socket_file, 0o666)
        ask = ("import socket, os, sys, json, struct; os.setgid(65534); os.setuid(65534);"
               " s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
               " print(s.recv(65536)[4:].decode())")  # the engine speaks first, and only to refuse
        refused = subprocess.run([sys.executable, "-c", ask, str(socket_file)], capture_output=True, text=True)
        assert "refused" in refused.stdout and "uid 65534" in refused.stdout, refused.stderr
        assert '"pid"' not in refused.stdout  # nothing about the engine is told
        os.chmod(warm.engines, 0o700)
    finally:
        warm.stop()
        shutil.rmtree(warm.engines, ignore_errors=True)


def test_warm_false_in_ratui_yaml_starts_no_engine(warm):
    (warm.root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo") + "engine:\n  warm: false\n")
    out = warm.ratui("run")
    assert out.returncode == 0, out.stderr
    assert "warm engine" not in out.stderr
    assert warm.status() is None and not engine_pids(warm.engines)


def test_ratui_yaml_edited_between_commands(warm):
    assert warm.ratui("run").returncode == 0
    engine = warm.ready()
    settings = warm.root / "ratui.yaml"
    settings.write_text(settings.read_text() + "run:\n  threads: 2\n")  # not Spark's: read again, same engine
    out = warm.ratui("run", "--force", "--json")
    assert out.returncode == 0, out.stderr
    assert warm.status()["pid"] == engine["pid"] and "replaced" not in out.stderr
    settings.write_text(settings.read_text().replace("spark.sql.shuffle.partitions: 2",
                                                     "spark.sql.shuffle.partitions: 3"))
    out = warm.ratui("run", "bronze.numbers", "--force")
    assert out.returncode == 0, out.stderr
    assert "replaced: ratui.yaml's Spark settings changed" in out.stderr
    wait_for(lambda: engine["pid"] not in engine_pids(warm.engines), "the engine of the old settings gone")


def test_an_engine_whose_project_is_gone_stops(warm):
    assert warm.ratui("run").returncode == 0
    engine = warm.ready()
    import shutil

    def deleted() -> bool:  # as `rm -rf` would, again while the engine still writes its logs in there
        shutil.rmtree(warm.root, ignore_errors=True)
        return not warm.root.exists()

    wait_for(deleted, "the project deleted")
    wait_for(lambda: engine["pid"] not in engine_pids(warm.engines), "the engine of a deleted project gone")
    assert not list(warm.engines.glob("*.sock"))


def test_a_second_project_gets_its_own_engine_and_a_moved_project_a_new_one(warm, make_project):
    """Two projects, two engines, neither reaching the other's tables; a project folder renamed while its engine runs:
    that engine stops (its project is gone from where it was) and the project, where it is now, gets a fresh one
    with every row it had."""
    assert warm.ratui("run").returncode == 0
    first = warm.ready()
    other = Warm(make_project({"demo/pipelines/bronze/letters/pipeline.sql": "SELECT 'a' AS letter"}, name="other"),
                 warm.engines)
    ran = other.ratui("run")
    assert ran.returncode == 0 and "warm engine starts beside this command" in ran.stderr, ran.stderr
    second = other.ready()
    assert second["pid"] != first["pid"] and warm.status()["pid"] == first["pid"]  # the first one untouched
    served = other.ratui("query", "SELECT concat('letter=', letter) AS l FROM bronze.letters")
    assert served.returncode == 0 and "letter=a" in served.stdout, served.stdout + served.stderr
    refused = other.ratui("query", "SELECT * FROM bronze.numbers")  # the first project's table: not there
    assert refused.returncode != 0 and "Tables at main: bronze.letters." in refused.stderr, refused.stderr
    assert other.status()["commands_served"] == 2

    moved = warm.root.with_name("moved")
    warm.root.rename(moved)
    wait_for(lambda: first["pid"] not in engine_pids(warm.engines), "the engine of the moved project gone")
    warm.root = moved
    again = warm.ratui("query", "SELECT concat('rows=', COUNT(*)) AS n FROM bronze.numbers")
    assert again.returncode == 0 and "rows=5" in again.stdout, again.stdout + again.stderr
    third = warm.ready()
    assert third["pid"] not in (first["pid"], second["pid"]) and third["project"] == str(moved)
    assert other.status()["pid"] == second["pid"]  # the other project's engine went on


def test_watch_runs_in_the_engine_and_ctrl_c_stops_only_the_watch(warm):
    """`ratui watch` served warm: a save re-runs what it affects on the engine's Spark at once, the runs recorded as
    the engine's; Ctrl-C stops the watch (exit 0, "stopping") and the engine lives on."""
    import threading

    assert warm.ratui("run").returncode == 0
    engine = warm.ready()
    watch = warm.popen("watch")
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")), daemon=True).start()
    try:
        wait_for(lambda: any(line.startswith("watching ") for line in lines), "the watch started")
        assert [s["argv"][0] for s in warm.status()["running"]] == ["watch"]  # served by the engine
        pipeline = warm.root / "demo/pipelines/bronze/numbers/pipeline.sql"
        pipeline.write_text("SELECT id, id * 2 AS twice FROM range(7)")
        wait_for(lambda: any("1 succeeded" in line or "2 succeeded" in line for line in lines), "the save's runs")
        latest = warm.runs()[0]
        assert latest["pid"] == engine["pid"] and latest["status"] == "success", latest
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=BOUND) == 0, watch.stderr.read()
        assert any(line.strip() == "stopping" for line in lines), lines
    finally:
        if watch.poll() is None:
            watch.kill()
    status = warm.status()
    assert status["pid"] == engine["pid"] and status["running"] == []  # the engine lives on, nothing in flight
    counted = warm.ratui("query", "SELECT concat('rows=', COUNT(*)) AS n FROM bronze.numbers")
    assert "rows=7" in counted.stdout, counted.stdout + counted.stderr


DAILY = """-- @merge_strategy: incremental_by_time
-- @time_column: day
-- @batch: day
SELECT CAST('{{ start }}' AS TIMESTAMP) AS day, id FROM {{ ref('bronze.numbers') }}
"""


def test_a_backfill_runs_in_the_engine_as_it_does_in_its_own_process(warm):
    """`ratui backfill` is one of the engine's commands: its intervals run on the engine's Spark (each run recorded
    with the engine's pid and trigger backfill), its --json lines as a cold backfill prints them."""
    (warm.root / "demo/pipelines/silver/daily").mkdir(parents=True)
    (warm.root / "demo/pipelines/silver/daily/pipeline.sql").write_text(DAILY)
    assert warm.ratui("run", "bronze.numbers").returncode == 0
    engine = warm.ready()
    words = ("backfill", "silver.daily", "--start", "2026-01-01", "--end", "2026-01-04", "--json")
    served = warm.ratui(*words)
    assert served.returncode == 0, served.stderr
    assert warm.status()["commands_served"] == 1
    lines = [json.loads(line) for line in served.stdout.splitlines() if line.strip()]
    intervals = [line for line in lines if "run_id" in line]
    assert [(i["start"], i["status"], i["rows"]) for i in intervals] == [
        ("2026-01-01T00:00:00", "success", 5), ("2026-01-02T00:00:00", "success", 5),
        ("2026-01-03T00:00:00", "success", 5)]
    runs = {r["id"]: r for r in warm.runs()}
    assert {(runs[i["run_id"]]["pid"], runs[i["run_id"]]["trigger"]) for i in intervals} == {(engine["pid"],
                                                                                              "backfill")}
    cold = warm.ratui(*words, "--no-warm")
    assert cold.returncode == 0, cold.stderr
    cold_lines = [json.loads(line) for line in cold.stdout.splitlines() if line.strip()]
    assert [line.get("event") for line in cold_lines] == [line.get("event") for line in lines]
    assert [(i["start"], i["status"], i["rows"]) for i in cold_lines if "run_id" in i] == \
        [(i["start"], i["status"], i["rows"]) for i in intervals]
