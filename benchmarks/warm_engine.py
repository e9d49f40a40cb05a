"""The warm engine (ratui/warm/): commands from a shell beside the same work in a warm process, measured in one run
of this script on fresh copies of the sample project.

    python benchmarks/warm_engine.py                    # rounds 5, RSS after 10 and 200 commands
    python benchmarks/warm_engine.py --rss-runs 1000

What it prints, each figure beside its reference:

  run           `ratui run bronze.raw_customers --force` from the shell, whole command, median of the 2nd to
                last round: through the warm engine, and with --no-warm (a process of its own); beside the same
                forced run in a warm in-process Engine (what the console does: its own Spark, started once) and
                beside plain PySpark doing that run's work warm (benchmarks/interactive.py's floor_of)
  query         `ratui query "SELECT COUNT(*) FROM silver.clean_orders"`, second time, warm and --no-warm
  first command with no engine running: warm on (the command runs in its own process and starts the engine
                beside it) beside --no-warm
  no JVM        `ratui check`, `runs` and `show` with no Java reachable (JAVA_HOME and PATH without it): they
                succeed, so they start no JVM; their wall time
  RSS           the engine process and its JVM after 10 commands and after --rss-runs commands

Timings are wall-clock, printed, never asserted. Check `uptime` first.
"""

from __future__ import annotations

import argparse
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

from interactive import floor_of, fresh_copy  # noqa: E402

RATUI = str(Path(sys.executable).parent / "ratui")
PIPELINE = "bronze.raw_customers"
QUERY = "SELECT COUNT(*) FROM silver.clean_orders"


def shell(project: Path, *words: str, env: dict | None = None) -> float:
    began = time.monotonic()
    done = subprocess.run([RATUI, *words, "--project", str(project)], capture_output=True, text=True, env=env)
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"ratui {' '.join(words)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def median_after_first(values: list[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


def in_process(project: Path, rounds: int, base: Path) -> tuple[float, float]:
    """The forced run in a warm in-process Engine (the console's way), and plain PySpark doing its work."""
    from ratui.engine.facade.engine import Engine
    from ratui.engine.spark import session as spark_mod

    engine = Engine.open(project)
    engine.start_spark()
    spark = spark_mod.get_spark(engine.settings)
    walls, floors = [], []
    for _ in range(rounds):
        began = time.monotonic()
        (result,) = engine.run([f"ecommerce.{PIPELINE}"], force=True)
        walls.append(time.monotonic() - began)
        assert result.status == "success", result.error
        floors.append(floor_of(spark, engine, result, base / "floor"))
    spark_mod.stop()
    engine.close()
    return median_after_first(walls), median_after_first(floors)


def engine_rss(project: Path, env: dict) -> tuple[int, int]:
    import json

    import psutil

    out = subprocess.run([RATUI, "engine", "status", "--json", "--project", str(project)], capture_output=True,
                         text=True, env=env, check=True).stdout
    pid = json.loads(out)["engine"]["pid"]
    process = psutil.Process(pid)
    jvm = sum(child.memory_info().rss for child in process.children(recursive=True) if "java" in child.name())
    return process.memory_info().rss, jvm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rss-runs", type=int, default=200)
    options = parser.parse_args()
    print(f"uptime: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    base = Path(tempfile.mkdtemp(prefix="ratui-warm-bench-"))
    env = {**os.environ, "RATUI_ENGINE_DIR": str(base / "engines"), "RATUI_WARM": "1"}
    try:
        project = fresh_copy(base, "sample")
        shell(project, "run", "--no-warm", env=env)  # every table built once

        console, floor = in_process(project, options.rounds, base)

        cold_first = shell(project, "run", PIPELINE, "--force", "--no-warm", env=env)
        warm_first = shell(project, "run", PIPELINE, "--force", env=env)  # starts the engine beside it
        subprocess.run([RATUI, "engine", "start", "--project", str(project)], env=env, check=True,
                       capture_output=True)
        warm = [shell(project, "run", PIPELINE, "--force", env=env) for _ in range(options.rounds)]
        cold = [shell(project, "run", PIPELINE, "--force", "--no-warm", env=env) for _ in range(options.rounds)]
        warm_query = [shell(project, "query", QUERY, env=env) for _ in range(2)][1]
        cold_query = [shell(project, "query", QUERY, "--no-warm", env=env) for _ in range(2)][1]

        w, c = median_after_first(warm), median_after_first(cold)
        print(f"\n`ratui run {PIPELINE} --force`, whole command, median of rounds 2-{options.rounds}")
        print(f"  warm engine          {w:6.2f} s")
        print(f"  --no-warm            {c:6.2f} s   warm is {c / w:.1f}x faster")
        print(f"  console's way        {console:6.2f} s   (in-process Engine.run)   warm/console {w / console:.2f}x")
        print(f"  plain PySpark floor  {floor:6.2f} s   (same work, warm)          warm/floor   {w / floor:.2f}x")
        print(f"\n`ratui query \"{QUERY}\"`, second time")
        print(f"  warm engine          {warm_query:6.2f} s")
        print(f"  --no-warm            {cold_query:6.2f} s   warm is {cold_query / warm_query:.1f}x faster")
        print("\nfirst command, no engine running")
        print(f"  warm on (starts it)  {warm_first:6.2f} s")
        print(f"  --no-warm            {cold_first:6.2f} s   ratio {warm_first / cold_first:.2f}")

        no_java = {**env, "JAVA_HOME": "/nonexistent", "PATH": "/usr/local/bin:/bin"}
        print("\nwith no Java reachable (so: no JVM started)")
        import json

        last = json.loads(subprocess.run([RATUI, "runs", "--json", "--limit", "1", "--project", str(project)],
                                         capture_output=True, text=True, env=env, check=True).stdout)["id"]
        for words in (("check",), ("runs",), ("show", last)):
            try:
                print(f"  ratui {' '.join(words)[:10]:<10} {shell(project, *words, env=no_java):6.2f} s")
            except SystemExit as exc:
                print(f"  ratui {' '.join(words)[:10]:<10} FAILED: {exc}")

        shell(project, "engine", "stop", env=env)
        for _ in range(10):
            shell(project, "query", QUERY, env=env)
        rss10 = engine_rss(project, env)
        for _ in range(options.rss_runs - 10):
            shell(project, "query", QUERY, env=env)
        rss_n = engine_rss(project, env)
        print(f"\nRSS of the engine (Python, JVM) after 10 commands: {rss10[0] / 2**20:,.0f} MiB, "
              f"{rss10[1] / 2**20:,.0f} MiB")
        print(f"RSS after {options.rss_runs} commands: {rss_n[0] / 2**20:,.0f} MiB, {rss_n[1] / 2**20:,.0f} MiB "
              f"(ratio {rss_n[0] / rss10[0]:.2f}, {rss_n[1] / max(rss10[1], 1):.2f})")
    finally:
        subprocess.run([RATUI, "engine", "stop", "--project", str(base / "sample")], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
