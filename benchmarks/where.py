"""Wall time of the sample project's forced run (`ratui run --project COPY --force`, a new process each time) where
Spark runs in three places, measured in one sitting:

    local      spark.master: local[*]           Spark in ratui's own JVM
    cluster    spark.master: spark://127.0.0.1:P a standalone Master and one Worker (2 cores, 2 GB) on this machine
    connect    spark.remote: sc://127.0.0.1:P   a Spark Connect server (local[2] inside, 2 GB) on this machine

The servers are started from pyspark's own distribution on 127.0.0.1 (tests/servers.py), one place at a time, and
stopped after their figures. Each place gets a first run (tables created; not timed), then `--repeat` forced runs.
A forced run re-runs every pipeline whatever changed: a process start (a JVM for local and cluster, a gRPC client
for Connect), ten pipelines, their quality tests and merges.

    python benchmarks/where.py [--repeat 3]

Prints the machine's load first, then each figure; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.servers import ratui_env, start_connect, start_master, start_worker, with_spark  # noqa: E402

SAMPLE = REPO / "sample_project"


def copy(base: Path, name: str) -> Path:
    dest = base / name / "sample"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def ratui_run(project: Path, *extra: str) -> tuple[float, float | None]:
    """(wall seconds of the process, the seconds ratui itself reports for the invocation)."""
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(project), *extra],
                         capture_output=True, text=True, env=ratui_env(), stdin=subprocess.DEVNULL, timeout=1200)
    wall = time.monotonic() - began
    if out.returncode != 0:
        raise SystemExit(f"ratui run {' '.join(extra)} failed in {project}:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    match = re.search(r"\bin ([\d.]+)s\s*$", out.stdout.strip())
    return wall, float(match.group(1)) if match else None


def measure(name: str, project: Path, repeat: int) -> list[tuple[float, float | None]]:
    wall, _ = ratui_run(project)
    print(f"  {name:<8} first run (tables created, not counted)  {wall:6.2f} s", flush=True)
    figures = []
    for i in range(repeat):
        wall, inside = ratui_run(project, "--force")
        figures.append((wall, inside))
        print(f"  {name:<8} forced run {i + 1}: {wall:6.2f} s wall"
              + (f" ({inside:.2f} s inside ratui's invocation)" if inside is not None else ""), flush=True)
    return figures


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="forced runs per place (default 3)")
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(load())
    base = Path(tempfile.mkdtemp(prefix="ratui-where-"))
    results: dict[str, list[tuple[float, float | None]]] = {}
    try:
        local = copy(base, "local")
        results["local"] = measure("local", with_spark(local, master="local[*]"), args.repeat)

        print(f"  starting a standalone Master and Worker on 127.0.0.1 ({load()})", flush=True)
        master = start_master(base / "cluster-servers")
        try:
            worker = start_worker(master, base / "cluster-servers", cores=2, memory="2g")
            try:
                project = with_spark(copy(base, "cluster"), master=master.url)
                results["cluster"] = measure("cluster", project, args.repeat)
            finally:
                worker.stop()
        finally:
            master.stop()

        print(f"  starting a Spark Connect server on 127.0.0.1 ({load()})", flush=True)
        server = start_connect(base / "connect-server")
        try:
            project = with_spark(copy(base, "connect"), remote=server.url)
            results["connect"] = measure("connect", project, args.repeat)
        finally:
            server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print()
    print(f"sample project, forced run (`ratui run --project COPY --force`, a new process), median of {args.repeat}:")
    local_median = statistics.median(w for w, _ in results["local"])
    for name, figures in results.items():
        walls = [w for w, _ in figures]
        inside = [i for _, i in figures if i is not None]
        median = statistics.median(walls)
        print(f"  {name:<8} {median:6.2f} s wall  (runs: {', '.join(f'{w:.2f}' for w in walls)})"
              + (f"  inside ratui {statistics.median(inside):6.2f} s" if inside else "")
              + (f"  {median / local_median:4.2f}x local" if name != "local" else ""))
    print(load())


if __name__ == "__main__":
    main()
