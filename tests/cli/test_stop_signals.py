"""A `ratui run` stopped from outside: Ctrl-C, `kill` (SIGTERM) and a closed terminal (SIGHUP) all cancel the runs in
flight (main unchanged, the run's branch deleted, the run recorded as cancelled) and exit 128+signal within a bounded
time; a run that does not stop (Python blocked in C) is ended by a second signal at once, or by the command itself
STOP_SECONDS after the first; a run whose process was killed outright (SIGKILL) is shown as dead by the next command
that reads state, a plain `ratui runs` included, not left "running".

The installed command in processes of its own, on a project whose Python pipeline's Spark tasks wait at a gate that
is never opened (tests/servers.py): only the stop can end the run, whatever the machine's pace.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import (
    json_lines, main_head, make_slow_project, ratui, ratui_background, ratui_env, running_run, wait_for,
)


STOP_WITHIN = 45.0  # the command's own bound is 30 s after the signal (cli.STOP_SECONDS)


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """One project for the module, version 1 on main: every test's run is stopped before it lands, and each test
    checks main and the branches as it found them."""
    project = make_slow_project(tmp_path_factory.mktemp("signals") / "slow", rows=40, parts=4, master="local[2]")
    out = ratui("run", "--project", str(project.root), "--json", "bronze.slow")
    assert out.returncode == 0, out.stdout + out.stderr
    project.set(version=2, delay=0, gated=4)  # every task of the next runs waits at the gate: only a stop ends them
    return project


def _task_waiting(project) -> None:
    """Wait until a task of the run's Spark job is running (it wrote its marker; it then waits at the gate)."""
    wait_for(lambda: list(project.markers.iterdir()), 120, "a task of the run's Spark job")


def _clear_markers(project) -> None:
    for marker in project.markers.iterdir():
        marker.unlink()


def _versions(project) -> list[int]:
    """The versions in bronze.slow on main, read by PyIceberg in this process (what a run left on main is checked
    here; `ratui query` is tested in tests/cli/test_cli.py)."""
    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    settings = load_settings(project.root)
    catalog = open_catalog(catalog_config(settings.catalog or None), settings.db_path, project.root)
    return sorted(set(catalog.load_table("main", "demo.bronze.slow").scan().to_arrow().column("version").to_pylist()))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopped_run_is_cancelled_and_main_is_unchanged(slow, tmp_path, sig):
    head, others = main_head(slow.root)
    assert others == []
    _clear_markers(slow)
    process = ratui_background("run", "--project", str(slow.root), "--force", "bronze.slow",
                               log=tmp_path / f"run-{sig.name}.out")
    try:
        run_id = running_run(slow.root, "demo.bronze.slow", time.monotonic() + 120)
        _task_waiting(slow)  # inside its build, in a Spark job that cannot end by itself
        stopped = time.monotonic()
        process.send_signal(sig)
        code = process.wait(STOP_WITHIN)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    output = (tmp_path / f"run-{sig.name}.out").read_text()
    assert code == 128 + sig, output
    assert f"{sig.name}: cancelling the runs in flight" in output
    print(f"\n{sig.name}: stopped in {time.monotonic() - stopped:.1f}s")
    (run,) = json_lines(ratui("show", run_id, "--project", str(slow.root), "--json").stdout)
    assert run["status"] == "cancelled" and run["error_code"] == "RAT-RUN-001", run
    assert main_head(slow.root) == (head, [])  # main as it was, the run's branch gone
    assert _versions(slow) == [1]


def test_a_killed_run_is_shown_as_dead_by_the_next_read(slow, tmp_path):
    head, _ = main_head(slow.root)
    process = ratui_background("run", "--project", str(slow.root), "--force", "bronze.slow", log=tmp_path / "k.out")
    try:
        run_id = running_run(slow.root, "demo.bronze.slow", time.monotonic() + 120)
    finally:
        process.send_signal(signal.SIGKILL)  # no handler can run: the process and its JVM's gateway just end
        process.wait(10)
    runs = json_lines(ratui("runs", "--project", str(slow.root), "--json").stdout)  # a read, nothing more
    run = next(r for r in runs if r["id"] == run_id)
    assert run["status"] == "failed" and run["error_code"] == "RAT-RUN-006", run
    assert main_head(slow.root) == (head, [])
    assert _versions(slow) == [1]


# in ratui's own process: code that catches BaseException refuses the cancel (and would swallow a KeyboardInterrupt)
STUCK = """\
# @merge_strategy: full_refresh
# @isolation: none
import time
from pathlib import Path


def run(ctx):
    Path(r"{asleep}").touch()
    while True:
        try:
            time.sleep(600)
        except BaseException:
            pass
"""


def _stuck(project, tmp_path) -> tuple[Path, str]:
    """bronze.stuck in the module's project, and the file it touches once asleep (removed first)."""
    asleep = tmp_path / "asleep"
    folder = project.root / "demo/pipelines/bronze/stuck"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pipeline.py").write_text(STUCK.format(asleep=asleep))
    return asleep, "bronze.stuck"


def test_a_second_signal_stops_a_run_that_will_not_stop_at_once(slow, tmp_path):
    """The first SIGTERM cancels, but the pipeline refuses (it catches BaseException); a second one stops the
    process at once, by the signal itself (not the command's own end STOP_SECONDS later, which exits 128+signal and
    says so), and the next read records the run dead."""
    asleep, stuck = _stuck(slow, tmp_path)
    log = tmp_path / "twice.out"
    process = ratui_background("run", "--project", str(slow.root), "--force", stuck, log=log)
    try:
        wait_for(asleep.exists, 180, "the stuck pipeline asleep in run(ctx)")
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: "SIGTERM: cancelling the runs in flight" in log.read_text(), 60, "the first signal's word")
        assert process.poll() is None  # the run cannot stop: the process waits for it
        process.send_signal(signal.SIGTERM)
        code = process.wait(STOP_WITHIN)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    text = log.read_text()
    assert code == -signal.SIGTERM, text  # ended by the second signal (a shell reports 143)
    assert "runs still going" not in text, text
    runs = json_lines(ratui("runs", "--project", str(slow.root), "--json", "--pipeline", "demo.bronze.stuck").stdout)
    assert runs[0]["status"] == "failed" and runs[0]["error_code"] == "RAT-RUN-006", runs[0]


def test_runs_still_going_after_the_stop_bound_end_the_command(slow, tmp_path):
    """One SIGTERM and a run that cannot stop: the command ends itself STOP_SECONDS later (30 s; here the same code
    with the bound set to 2 s, so the test does not wait half a minute), says so, exits 128+signal, and the next
    read records the run dead."""
    from ratui.cli import run as cli_run

    assert cli_run.STOP_SECONDS == 30.0  # what README promises
    asleep, stuck = _stuck(slow, tmp_path)
    log = tmp_path / "bound.out"
    code = ("import sys; import ratui.cli.run as r; r.STOP_SECONDS = 2.0; from ratui.cli.main import main; "
            "sys.exit(main(sys.argv[1:]))")
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-c", code, "run", "--project", str(slow.root), "--force", stuck],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=ratui_env(),
                                   start_new_session=True)
    try:
        wait_for(asleep.exists, 180, "the stuck pipeline asleep in run(ctx)")
        process.send_signal(signal.SIGTERM)
        exit_code = process.wait(STOP_WITHIN)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    text = log.read_text()
    assert exit_code == 128 + signal.SIGTERM, text
    assert "runs still going 2 s after the stop: exiting; the next ratui records them" in text
    runs = json_lines(ratui("runs", "--project", str(slow.root), "--json", "--pipeline", "demo.bronze.stuck").stdout)
    assert runs[0]["status"] == "failed" and runs[0]["error_code"] == "RAT-RUN-006", runs[0]
