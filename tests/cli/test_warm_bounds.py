"""The warm engine over days and under faults, through the installed command line: it renews itself past its
memory bound or its count of commands (said once by the next command), a wedged engine is killed and replaced
within a bounded wait, a full disk in the engines' folder runs the command in its own process (said why, same exit
code), and `ratui diff` and `ratui merge` served warm print and exit as they do cold.

Every engine here lives in the test's own folder (RATUI_ENGINE_DIR) and is stopped at the end of its test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.cli.test_warm_engine import engine_pids, wait_for, warm_project
from tests.conftest import TEST_SETTINGS


@pytest.fixture
def warm(make_project, tmp_path):
    project = warm_project(make_project, tmp_path)
    yield project
    project.stop()


def _set_engine(warm, section: str) -> None:
    (warm.root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo") + "engine:\n" + section)


def test_the_engine_renews_itself_past_its_count_of_commands_or_its_memory_and_says_so_once(warm):
    _set_engine(warm, "  max_commands: 2\n")
    assert warm.ratui("run").returncode == 0  # in its own process; the engine starts beside it
    first = warm.ready()
    assert first["max_commands"] == 2 and first["max_memory_mb"] == 3072
    assert first["rss_bytes"] > first["rss_engine_bytes"] > 0  # the engine and its JVM, counted together
    jvm = [p for p in psutil.Process(first["pid"]).children(recursive=True) if "java" in p.name()]
    assert jvm and any(word.startswith("-Xmx") for word in jvm[0].cmdline())  # its heap is capped
    shown = warm.ratui("engine", "status")
    assert "renews itself after 2" in shown.stdout and "renews itself past 3,072 MiB" in shown.stdout

    for _ in range(2):
        out = warm.ratui("run", "bronze.numbers", "--force")
        assert out.returncode == 0 and "renewed" not in out.stderr, out.stderr
    wait_for(lambda: first["pid"] not in engine_pids(warm.engines), "the engine gone after its 2nd command")
    wait_for(lambda: not [p for p in jvm if _alive(p.pid)], "its JVM gone too")
    after = warm.ratui("run", "bronze.numbers", "--force")
    assert after.returncode == 0, after.stderr
    assert after.stderr.count("renewed itself") == 1 and "engine.max_commands 2" in after.stderr
    second = warm.ready()
    assert second["pid"] != first["pid"]

    # a memory bound below what an engine with Spark takes: it renews after its first command
    _set_engine(warm, "  max_memory_mb: 512\n")
    served = warm.ratui("run", "bronze.numbers", "--force", "--json")
    assert served.returncode == 0 and "renewed" not in served.stderr, served.stderr
    assert warm.runs()[0]["pid"] == second["pid"]  # served by the engine, then it renewed itself
    wait_for(lambda: second["pid"] not in engine_pids(warm.engines), "the engine gone past its memory bound")
    told = warm.ratui("run", "bronze.numbers", "--force")
    assert told.returncode == 0 and told.stderr.count("renewed itself") == 1, told.stderr
    assert "engine.max_memory_mb 512" in told.stderr
    assert "renewed" not in warm.ratui("query", "SELECT 1").stderr  # said once
    assert "retiring: renewing itself" in warm.ratui("engine", "logs", "-n", "400").stdout


def test_a_wedged_engine_is_killed_and_replaced_within_a_bounded_wait(warm):
    assert warm.ratui("run").returncode == 0
    wedged = warm.ready()
    jvm = [p.pid for p in psutil.Process(wedged["pid"]).children(recursive=True)]
    os.kill(wedged["pid"], signal.SIGSTOP)  # it accepts nothing, answers nothing
    try:
        began = time.monotonic()
        out = warm.ratui("run", "bronze.numbers", "--force", env={"RATUI_ENGINE_ANSWER_SECONDS": "3"})
        waited = time.monotonic() - began
    finally:
        if psutil.pid_exists(wedged["pid"]):
            os.kill(wedged["pid"], signal.SIGCONT)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("did not answer in 3 s") == 1 and f"pid {wedged['pid']}" in out.stderr
    assert waited < 3 + 120  # the bounded wait, then the command itself (a JVM of its own)
    assert wedged["pid"] not in engine_pids(warm.engines)
    assert jvm and not [pid for pid in jvm if _alive(pid)]  # its JVM killed with it
    fresh = warm.ready()  # the command started a fresh engine beside it
    assert fresh["pid"] != wedged["pid"]
    again = warm.ratui("run", "bronze.numbers", "--force")
    assert again.returncode == 0 and "did not answer" not in again.stderr, again.stderr
    assert warm.runs()[0]["pid"] == fresh["pid"]


@pytest.fixture
def full_disk(warm, tmp_path):
    """The engines' folder on a tmpfs of its own (256 KiB), filled: ENOSPC on every write. Must be root."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"cannot mount a tmpfs for the full disk (run as root): {mounted.stderr}"
    warm.engines = folder
    warm.env["RATUI_ENGINE_DIR"] = str(folder)
    filler = folder / "filler"
    try:
        yield filler
    finally:
        warm.stop()
        subprocess.run(["umount", str(folder)], check=False)
        if os.path.ismount(folder):
            subprocess.run(["umount", "-l", str(folder)], check=True)


def _fill(filler: Path) -> None:
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.strerror == "No space left on device"
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_full_disk_in_the_engines_folder_runs_the_command_in_its_own_process(warm, full_disk):
    _fill(full_disk)
    out = warm.ratui("run", "bronze.numbers", "--json")
    cold = warm.ratui("run", "nosuch")
    assert out.returncode == 0, out.stderr
    assert "RAT-ENG-003" in out.stderr and "No space left on device" in out.stderr
    assert "runs in its own process" in out.stderr and "starts beside" not in out.stderr
    assert json.loads([line for line in out.stdout.splitlines() if '"pipeline"' in line][0])["status"] == "success"
    assert cold.returncode == warm.ratui("run", "nosuch", "--no-warm").returncode != 0  # exit code unchanged
    assert not engine_pids(warm.engines)

    full_disk.unlink()  # room again: the next command starts the engine beside it
    assert "starts beside" in warm.ratui("run", "bronze.numbers", "--force").stderr
    engine = warm.ready()
    _fill(full_disk)  # and full once more while it runs: it serves on, its log unwritten
    served = warm.ratui("run", "bronze.numbers", "--force")
    assert served.returncode == 0, served.stderr
    assert warm.runs()[0]["pid"] == engine["pid"] and warm.status()["pid"] == engine["pid"]


def test_diff_and_merge_served_warm_print_and_exit_as_they_do_cold(warm):
    assert warm.ratui("run").returncode == 0
    engine = warm.ready()
    assert warm.ratui("branch", "create", "dev").returncode == 0
    pipeline = warm.root / "demo/pipelines/bronze/numbers/pipeline.sql"
    pipeline.write_text("SELECT id, id * 2 AS twice FROM range(8)")
    changed = warm.ratui("run", "bronze.numbers", "--ref", "dev", "--force")
    assert changed.returncode == 0, changed.stderr

    for args in (("diff", "main", "dev"), ("diff", "main", "dev", "--json"), ("diff", "main", "nosuch"),
                 ("diff", "nosuch", "--json"), ("merge", "dev", "--dry-run"), ("merge", "dev", "--dry-run", "--json"),
                 ("merge", "nosuch"), ("merge", "nosuch", "--json")):
        hot, cold = warm.ratui(*args), warm.ratui(*args, "--no-warm")
        assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr), args
    assert warm.status()["commands_served"] >= 8  # they were served warm

    merged = warm.ratui("merge", "dev", "--json")
    assert merged.returncode == 0, merged.stderr
    counted = warm.ratui("query", "SELECT concat('rows=', COUNT(*)) AS n FROM bronze.numbers")
    assert counted.returncode == 0 and "rows=8" in counted.stdout, counted.stdout  # dev's 8 rows, now on main
    again, again_cold = warm.ratui("merge", "dev", "--json"), warm.ratui("merge", "dev", "--json", "--no-warm")
    assert (again.returncode, again.stdout) == (again_cold.returncode, again_cold.stdout)
    assert warm.status()["pid"] == engine["pid"]
    # between commands the engine's JVM collects its heap in full and gives back what it no longer holds (heap.py)
    wait_for(lambda: "full collection of the JVM's heap" in warm.ratui("engine", "logs", "-n", "400").stdout,
             "a full collection between commands, in the engine's log")
