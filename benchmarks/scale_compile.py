"""Compile and change detection at scale (benchmarks/scale.py --only compile; or run this file).

    python benchmarks/scale_compile.py                      # 150, 1,500, 15,000 pipelines; no-op run at 150
    python benchmarks/scale_compile.py --noop 150,1500      # also the no-op run at 1,500 (its first run: ~11 min)
    python benchmarks/scale_compile.py --workdir /tmp/keep  # keep (and reuse) the generated and run projects

Figures, each a fresh process of the installed CLI unless said otherwise (median of --repeat):
    ratui check                 compile with the compile cache of an earlier compile (the usual case)
    ratui check (cold)          the same with no cache: every pipeline parsed and rendered (the reference)
    ratui check, 1,000 bad refs two in three pipelines ref a table that does not exist (one hint each)
    no-op ratui run             everything unchanged since the last run (after a real first run on Spark)
    save -> run started         a watcher (in process, its project compiled): a pipeline file saved -> the plan
                                with it handed to the runner; the watcher's 300 ms debounce included
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
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.scale import Figure  # noqa: E402
from tests.scale_project import generate_project  # noqa: E402

CLI = [sys.executable, "-m", "ratui"]
GOALS = {150: 1.0, 1500: 1.0, 15000: 10.0}  # the issue's: <= 1.0 s at 1,500; within 10x of that at 15,000
SAVE_GOALS = {150: 0.5, 1500: 0.5, 15000: 5.0}


def timed(cmd: list[str], cwd: Path, ok=(0,)) -> float:
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - began
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return took


def median(cmd: list[str], cwd: Path, repeat: int, ok=(0,)) -> float:
    return statistics.median(timed(cmd, cwd, ok) for _ in range(repeat))


def project(workdir: Path, size: int) -> Path:
    root = workdir / f"p{size}"
    if not (root / "ratui.yaml").is_file():
        generate_project(root, size)
    return root


def bad_refs(workdir: Path, size: int, count: int) -> Path:
    """A copy of the project where `count` pipelines ref a table that does not exist."""
    root = workdir / f"bad{size}"
    if not root.exists():
        shutil.copytree(project(workdir, size), root, ignore=shutil.ignore_patterns(".ratui", "warehouse"))
        done = 0
        for sql in sorted(root.glob("*/pipelines/*/*/pipeline.sql")):
            text = sql.read_text()
            new = re.sub(r"ref\('([a-z_.0-9]+)'\)", lambda m: f"ref('{m.group(1)}x')", text, count=1)
            if new != text:
                sql.write_text(new)
                done += 1
                if done == count:
                    break
    return root


def save_to_run(root: Path, repeat: int) -> float:
    """A watcher on the compiled project: a saved pipeline file -> the runner called with its key."""
    from ratui.engine.events import WatchStarted  # noqa: F401
    from ratui.engine.watch.watcher import Watcher

    started = threading.Event()
    seen: list[float] = []

    def runner(keys: list[str]) -> list:
        seen.append(time.perf_counter())
        started.set()
        return []

    watcher = Watcher(root, run_keys=runner)
    watcher.start()
    target = sorted(root.glob("*/pipelines/gold/*/pipeline.sql"))[-1]
    text = target.read_text()
    times = []
    try:
        time.sleep(2.0 + len(list(root.glob("*/pipelines/*/*"))) / 1000)  # the watcher's own first compile
        for i in range(repeat):
            started.clear()
            began = time.perf_counter()
            target.write_text(text + f"-- saved {i}\n")
            if not started.wait(60):
                raise SystemExit("the watcher never planned the saved pipeline")
            times.append(seen[-1] - began)
            time.sleep(0.5)
    finally:
        target.write_text(text)
        watcher.stop()
    return statistics.median(times)


def figures(args, workdir: Path) -> list[Figure]:
    workdir.mkdir(parents=True, exist_ok=True)
    out: list[Figure] = []
    repeat = max(1, args.repeat)
    for size in args.sizes:
        root = project(workdir, size)
        cache = root / ".ratui" / "compile-cache.json"
        cache.unlink(missing_ok=True)
        cold = timed(CLI + ["check"], root)
        warm = median(CLI + ["check"], root, repeat)
        out.append(Figure("ratui check", size, "pipelines", warm, GOALS.get(size),
                          f"cold (no cache, first compile) {cold:.2f} s: {cold / warm:.1f}x"))
        out.append(Figure("ratui check (cold: every pipeline parsed)", size, "pipelines", cold, None, "reference"))
        print(f"  check at {size}: {warm:.3f} s (cold {cold:.2f} s)", flush=True)
        if size >= 1500:
            bad = bad_refs(workdir, size, 1000)
            timed(CLI + ["check"], bad, ok=(2,))
            took = median(CLI + ["check"], bad, repeat, ok=(2,))
            out.append(Figure("ratui check, 1,000 unknown refs", size, "pipelines", took, 1.0,
                              "each hint names at most three close tables"))
            print(f"  check with 1,000 unknown refs at {size}: {took:.3f} s", flush=True)
        if size <= 15000:
            took = save_to_run(root, repeat)
            out.append(Figure("saved file -> its run started (watch)", size, "pipelines", took, SAVE_GOALS.get(size),
                              "the 300 ms debounce included"))
            print(f"  save -> run at {size}: {took:.3f} s", flush=True)
    for size in args.noop:
        root = workdir / f"run{size}"
        if not (root / ".ratui" / "ratui.db").is_file():
            if root.exists():
                shutil.rmtree(root)
            shutil.copytree(project(workdir, size), root, ignore=shutil.ignore_patterns(".ratui"))
            print(f"  first run of {size} pipelines (Spark, --threads 2) ...", flush=True)
            first = timed(CLI + ["run", "--threads", "2"], root)
            print(f"  first run: {first:.1f} s", flush=True)
        timed(CLI + ["run"], root)
        took = median(CLI + ["run"], root, repeat)
        out.append(Figure("no-op ratui run", size, "pipelines", took, 1.0 if size <= 1500 else 10.0,
                          "every pipeline unchanged: recorded as skipped"))
        print(f"  no-op run at {size}: {took:.3f} s", flush=True)
        runs = max(getattr(args, "runs", None) or [0])
        if runs and size == min(args.noop):  # the same with a long history (older runs of the same pipelines)
            history = workdir / f"run{size}-history{runs}"
            if not history.exists():
                shutil.copytree(root, history)
                from tests.scale_project import all_keys, seed_runs

                seed_runs(history, runs, pipelines=all_keys(size))
                timed(CLI + ["run"], history)  # its first open builds the history's indexes (once)
            took_long = median(CLI + ["run"], history, repeat)
            out.append(Figure(f"no-op ratui run, {runs:,} runs in the history", size, "pipelines", took_long, 1.0,
                              f"{took_long / took:.2f}x the same project's with its own few runs"))
            print(f"  no-op run at {size} with {runs:,} runs: {took_long:.3f} s", flush=True)
    return out


def main() -> None:
    from benchmarks.scale import print_table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="150,1500,15000")
    parser.add_argument("--noop", default="150", help="sizes for the no-op run (each needs a first run on Spark)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", default="1000000", help="the no-op run again with this many runs in the history")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.noop = [int(s) for s in args.noop.split(",") if s]
    args.runs = [int(s) for s in args.runs.split(",") if s]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="ratui-scale-compile-") as tmp:
        print_table(figures(args, Path(args.workdir or tmp)))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
