"""A `ratui run` stopped from outside: Ctrl-C, `kill` (SIGTERM) and a closed terminal (SIGHUP) all cancel the runs in
flight (main unchanged, the run's branch deleted, the run recorded as cancelled) and exit 128+signal within a bounded
time; a run whose process was killed outright (SIGKILL) is shown as dead by the next command that reads state, a
plain `ratui runs` included, not left "running".

The installed command in processes of its own, on a project whose Python pipeline sleeps in a UDF (tests/servers.py).
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.servers import json_lines, main_head, make_slow_project, ratui, ratui_background, running_run


STOP_WITHIN = 45.0  # the command's own bound is 30 s after the signal (cli.STOP_SECONDS)


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """One project for the module, version 1 on main: every test's run is stopped before it lands, and each test
    checks main and the branches as it found them."""
    project = make_slow_project(tmp_path_factory.mktemp("signals") / "slow", rows=40, parts=4, master="local[2]")
    out = ratui("run", "--project", str(project.root), "--json", "bronze.slow")
    assert out.returncode == 0, out.stdout + out.stderr
    project.set(version=2, delay=1.0)  # 40 rows, a second each, on 2 cores: about 20 s of work
    return project


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
    process = ratui_background("run", "--project", str(slow.root), "--force", "bronze.slow",
                               log=tmp_path / f"run-{sig.name}.out")
    try:
        run_id = running_run(slow.root, "demo.bronze.slow", time.monotonic() + 120)
        time.sleep(1.0)  # inside its build: Spark tasks sleeping
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
