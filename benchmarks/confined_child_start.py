"""A confined child's start, without Spark: a fresh process (`python -I -m ratui.engine.isolation.child`, what
the jail and process levels still use) against one forked from the warm template (isolation/fork_server.py, the
confined level's). Each child gets a plan without tables or zones (so it connects to nothing), is confined
(limits, Landlock, seccomp), runs a run(ctx) that returns at once, and ends; printed: the median, over --repeat
children, of the wall time from start to exit and to each step the child reports. No JVM: it runs beside Spark
work without the shared lock. The load average is printed before and after (`uptime`).

    python benchmarks/confined_child_start.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def plan(folder: Path, pipeline: Path, parent: int, report_fd: int) -> dict:
    from ratui.engine.isolation.runner import python_reads

    return {"file": str(pipeline / "pipeline.py"), "text": "def run(ctx):\n    return 1\n", "namespace": "demo",
            "parent": parent, "url": "sc://localhost:9/;token=unused", "port": 9, "level": "confined",
            "tables": {}, "zones": {}, "this": None, "run_started_at": "2026-01-01T00:00:00",
            "watermark_value": None, "incremental": False, "scd2": False, "scratch": str(folder / "scratch"),
            "result": str(folder / "result"), "read": [str(p) for p in python_reads(pipeline)],
            "report_fd": report_fd,
            "limits": {"cpu_seconds": 60, "memory_bytes": 2 << 30, "file_bytes": 1 << 26, "open_files": 256}}


def one(kind: str, root: Path, number: int) -> dict[str, float]:
    from ratui.engine.isolation import fork_server
    from ratui.engine.isolation.limits import child_environment

    folder, pipeline = root / f"run-{kind}-{number}", root / "pipeline"
    (folder / "scratch").mkdir(parents=True)
    pipeline.mkdir(exist_ok=True)
    env = child_environment(os.environ, folder / "scratch")
    read_fd, write_fd = os.pipe()
    began = time.time()
    if kind == "forked":
        forks = fork_server.server(root / "state")
        child = forks.fork(env, write_fd)
        os.close(write_fd)
        text = json.dumps(plan(folder, pipeline, forks.pid, fork_server.REPORT_FD))
    else:
        child = subprocess.Popen([sys.executable, "-I", "-X", "utf8", "-m", "ratui.engine.isolation.child"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 cwd=str(folder / "scratch"), env=env, start_new_session=True, pass_fds=(write_fd,))
        os.close(write_fd)
        text = json.dumps(plan(folder, pipeline, os.getpid(), write_fd))
    child.stdin.write(text.encode())
    child.stdin.close()
    child.stdout.read()
    child.wait(60)
    ended = time.time()
    with os.fdopen(read_fd) as stream:
        steps = {m["step"]: m["at"] - began for m in map(json.loads, stream) if "step" in m}
    assert "connected" in steps, steps
    return {**steps, "exit": ended - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    import pandas  # noqa: F401 - as in ratui: python_reads() lists the folders of what ratui imported
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401

    from ratui.engine.isolation import fork_server

    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory(prefix="ratui-bench-child-") as tmp:
        root = Path(tmp)
        began = time.monotonic()
        assert fork_server.server(root / "state").ready(), fork_server.server(root / "state").error
        print(f"the template's start (its imports): {time.monotonic() - began:.2f} s, once per ratui process")
        timings: dict[str, list[dict[str, float]]] = {"exec'd": [], "forked": []}
        for number in range(args.repeat):
            for kind in timings:
                timings[kind].append(one(kind, root, number))
        fork_server.stop_all()
    print(f"{'child':<8} {'imported':>9} {'connected':>10} {'exit':>7}   (median seconds from its start)")
    for kind, runs in timings.items():
        cells = [statistics.median(r[step] for r in runs) for step in ("imported", "connected", "exit")]
        print(f"{kind:<8} {cells[0]:>9.2f} {cells[1]:>10.2f} {cells[2]:>7.2f}")
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
