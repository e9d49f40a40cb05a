"""The warm engine's memory over many commands: `ratui run bronze.raw_customers --force` from the shell, through the
engine, on a fresh copy of the sample project, N times; the RSS of the engine's process tree (the engine and
Spark's JVM) after 10 runs and after N, side by side, and how often the engine renewed itself on the way
(engine.max_memory_mb, engine.max_commands: the project's, else their defaults).

    python benchmarks/warm_memory.py                 # N = 1000 (issue 49's target: within 1.3x of after 10)
    python benchmarks/warm_memory.py --runs 60
    python benchmarks/warm_memory.py --runs 300 --max-commands 100 --max-memory-mb 2048

The RSS is sampled every --every runs too (its peak is printed), and the wall time of the runs (median, and the
slowest: a run right after a renewal runs in its own process while a fresh engine starts beside it). Timings and
sizes are printed, never asserted. The load is printed first; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from interactive import fresh_copy  # noqa: E402

RATUI = str(Path(sys.executable).parent / "ratui")
PIPELINE = "bronze.raw_customers"
MIB = 2**20


def ratui(project: Path, env: dict, *words: str) -> subprocess.CompletedProcess:
    done = subprocess.run([RATUI, *words, "--project", str(project)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"ratui {' '.join(words)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def tree_rss(project: Path, env: dict) -> tuple[int, int, int] | None:
    """(pid, the engine's RSS, its children's: Spark's JVM) of the running engine; None when none runs."""
    import psutil

    engine = json.loads(ratui(project, env, "engine", "status", "--json").stdout)["engine"]
    if not engine:
        return None
    try:
        process = psutil.Process(engine["pid"])
        children = sum(child.memory_info().rss for child in process.children(recursive=True))
        return engine["pid"], process.memory_info().rss, children
    except psutil.Error:
        return None


def settle(project: Path, env: dict) -> tuple[int, int, int]:
    """The engine's RSS once one runs with its Spark up (after a renewal the next one may still be starting)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        engine = json.loads(ratui(project, env, "engine", "status", "--json").stdout)["engine"]
        if engine and engine.get("spark"):
            rss = tree_rss(project, env)
            if rss is not None:
                return rss
        time.sleep(0.5)
    raise SystemExit("no warm engine with its Spark up within 300 s")


def show(label: str, rss: tuple[int, int, int]) -> str:
    pid, own, children = rss
    return (f"{label:<22} {(own + children) / MIB:7,.0f} MiB  (engine {own / MIB:,.0f} MiB + JVM {children / MIB:,.0f} "
            f"MiB; pid {pid})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000, help="forced runs through the engine (at least 11)")
    parser.add_argument("--every", type=int, default=25, help="sample the RSS every this many runs")
    parser.add_argument("--max-commands", type=int, help="engine.max_commands in the copy's ratui.yaml")
    parser.add_argument("--max-memory-mb", type=int, help="engine.max_memory_mb in the copy's ratui.yaml")
    options = parser.parse_args()
    if options.runs < 11:
        parser.error("--runs: at least 11")
    load = os.getloadavg()
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min) on {os.cpu_count()} cores")
    base = Path(tempfile.mkdtemp(prefix="ratui-warm-memory-"))
    env = {**os.environ, "RATUI_ENGINE_DIR": str(base / "engines"), "RATUI_WARM": "1"}
    project = fresh_copy(base, "sample")
    bounds = {key: value for key, value in (("max_commands", options.max_commands),
                                            ("max_memory_mb", options.max_memory_mb)) if value is not None}
    if bounds:
        with open(project / "ratui.yaml", "a", encoding="utf-8") as fh:
            fh.write("engine:\n" + "".join(f"  {key}: {value}\n" for key, value in bounds.items()))
    try:
        ratui(project, env, "run", "--no-warm")  # every table built once
        ratui(project, env, "engine", "start")
        walls: list[float] = []
        renewals = 0
        peak = (0, 0, 0)
        after10 = None
        for number in range(1, options.runs + 1):
            began = time.monotonic()
            done = ratui(project, env, "run", PIPELINE, "--force")
            walls.append(time.monotonic() - began)
            renewals += done.stderr.count("renewed itself")
            if number == 10:
                after10 = settle(project, env)
            elif number % options.every == 0:
                rss = tree_rss(project, env)
                if rss is not None and sum(rss[1:]) > sum(peak[1:]):
                    peak = rss
            if number % 100 == 0:
                print(f"  {number} runs, {renewals} renewal(s), median {statistics.median(walls):.2f} s", flush=True)
        after_n = settle(project, env)
        assert after10 is not None
        print(f"\n`ratui run {PIPELINE} --force` through the warm engine, {options.runs} times")
        print(show("RSS after 10 runs", after10))
        print(show(f"RSS after {options.runs} runs", after_n))
        if peak[0]:
            print(show(f"peak (every {options.every})", peak))
        ratio = sum(after_n[1:]) / sum(after10[1:])
        print(f"ratio after {options.runs} / after 10: {ratio:.2f}x (target: within 1.3x)")
        print(f"renewals: {renewals} (engine.max_commands / engine.max_memory_mb: "
              f"{bounds or 'the defaults, 500 / 3072 MiB'})")
        print(f"wall per run: median {statistics.median(walls):.2f} s, slowest {max(walls):.2f} s")
    finally:
        subprocess.run([RATUI, "engine", "stop", "--project", str(project)], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
