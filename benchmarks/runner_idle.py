"""The runner's idle cost (issue 51): `ratui up` on a project of 150 pipelines, 20 schedules (none due in the window),
5 landing zones, freshness on every gold table and alert rules on failure and freshness, left alone for a while:
its CPU (as a share of one core) and its resident memory, beside the goals (under 1% of a core, under 200 MB for
ratui's Python) and beside references measured in the same sitting: the resident memory of a Python that has only
imported ratui's engine (the floor), and the CPU of one `ratui check` of the same project (what one loop's compile
would cost without the compile cache).

    python benchmarks/runner_idle.py [SECONDS]     # default 600 (the issue's ten minutes)

Nothing is due in the window, so no Spark starts (its JVM's memory is printed beside: 0 when none runs). `uptime`
first; figures are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = (("bronze", 50), ("silver", 50), ("gold", 50))


def make_project(root: Path) -> Path:
    (root / "demo" / "pipelines").mkdir(parents=True)
    zones = [f"zone{i}" for i in range(5)]
    for zone in zones:
        (root / "demo" / "landing" / zone).mkdir(parents=True)
        (root / "demo" / "landing" / zone / "part-0.csv").write_text("id,value\n1,a\n2,b\n")
    for layer, count in LAYERS:
        for i in range(count):
            folder = root / "demo" / "pipelines" / layer / f"t{i:03d}"
            folder.mkdir(parents=True)
            if layer == "bronze":
                sql = f"SELECT * FROM {{{{ landing_zone('{zones[i % 5]}') }}}}"
            elif layer == "silver":
                sql = f"SELECT id, value FROM {{{{ ref('bronze.t{i:03d}') }}}}"
            else:
                sql = ("-- @freshness: warn 26h, error 50h\n"
                       f"SELECT a.id, a.value FROM {{{{ ref('silver.t{i:03d}') }}}} a "
                       f"JOIN {{{{ ref('silver.t{(i + 1) % 50:03d}') }}}} b ON a.id = b.id")
            (folder / "pipeline.sql").write_text(sql + "\n")
    schedules = "\n".join(f'  - {{name: s{i:02d}, select: "gold.t{i:03d}+", cron: "{i % 60} 3 1 1 *"}}'
                          for i in range(20))
    (root / "ratui.yaml").write_text(
        "namespace: demo\nspark:\n  master: local[1]\nrunner:\n  loop_seconds: 5\n"
        f"schedules:\n{schedules}\n"
        "alerts:\n  channels:\n    ops: {url_env: RATUI_BENCH_HOOK}\n  rules:\n"
        "    - {on: failure, notify: [ops]}\n    - {on: freshness, select: layer:gold, notify: [ops]}\n")
    return root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cpu_seconds(process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def main() -> None:
    import psutil

    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    work = Path(tempfile.mkdtemp(prefix="ratui-runner-idle-"))
    env = {**os.environ, "RATUI_ENGINE_DIR": str(work / "engines"), "RATUI_UP_TOKEN": "bench-token-0123456789abcdef"}
    (work / "engines").mkdir(mode=0o700)
    try:
        root = make_project(work / "p")
        began = time.monotonic()
        check = subprocess.run([sys.executable, "-m", "ratui", "check", "--project", str(root)], capture_output=True,
                               text=True, env=env)
        check_wall = time.monotonic() - began
        assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
        floor = subprocess.run([sys.executable, "-c", "import resource, ratui.engine.facade.engine, ratui.runner."
                                "runner; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                               capture_output=True, text=True, env=env)
        floor_mb = int(floor.stdout.strip()) / 1024
        runner = subprocess.Popen([sys.executable, "-m", "ratui", "up", "--project", str(root), "--json",
                                   "--health-port", str(free_port())], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        process = psutil.Process(runner.pid)
        time.sleep(15)  # its start (imports, first compile, the lease) is not idle time
        cpu_start, wall_start = cpu_seconds(process), time.monotonic()
        time.sleep(seconds)  # the measured idle window itself
        cpu = cpu_seconds(process) - cpu_start
        wall = time.monotonic() - wall_start
        rss = process.memory_info().rss / 2**20
        jvm = sum(c.memory_info().rss for c in process.children(recursive=True) if "java" in c.name()) / 2**20
        runner.terminate()
        out, _ = runner.communicate(timeout=120)
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        fires = [e for e in events if e.get("event") == "fire"]
        print(f"project: 150 pipelines, 20 schedules (none due), 5 zones; idle window {wall:.0f} s; "
              f"{len(fires)} fires in it; runner exit code {runner.returncode}")
        print(f"runner CPU: {cpu:.2f} s over {wall:.0f} s = {100 * cpu / wall:.2f}% of one core (goal < 1%)")
        print(f"  reference: one `ratui check` of the project, cold process: {check_wall:.2f} s wall "
              f"(a loop every 5 s without the compile cache would cost ~{100 * check_wall / 5:.0f}% of a core)")
        print(f"runner RSS (Python): {rss:.0f} MiB (goal < 200 MB = 191 MiB); floor, a Python that imported the "
              f"engine and the runner: {floor_mb:.0f} MiB ({rss / floor_mb:.2f}x)")
        print(f"JVM beside it: {jvm:.0f} MiB (none started: nothing was due)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
