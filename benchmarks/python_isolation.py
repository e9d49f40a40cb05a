"""A Python pipeline's warm run confined (python.isolation: confined: a child process under Landlock and seccomp,
reaching data through ratui's data server) beside the same pipeline in ratui's own process (isolation: none), in
one ratui process, on a copy of the sample project.

The sample's gold.country_summary (a Python pipeline reading gold.customer_lifetime_value) and a second Python
pipeline reading silver.clean_orders (about --rows rows: the generator's orders are repeated to that size) are run
forced, the two levels alternating, after one warm-up run of each (the data server's start, the JVM's JIT); printed
per pipeline and level: the run's median wall time and its build phase (where run(ctx) runs), and the confined
run's extra time over the in-process one. The in-process figure is the reference of the confined one beside it.
The first confined run of a process pays the data server's start when nothing started it before: printed once.
Then, as in a long-lived process (the console's Spark start, the warm engine's warm-up: Engine.start_spark), the
data server and the fork server are stopped, started early (Engine.start_data_server_early) and waited for, and
the first confined run after that start is printed beside the in-process run. A confined child is forked from the
warm template (isolation/fork_server.py); RATUI_FORK_SERVER=0 measures the exec'd child instead. The load average
is printed before and after (`uptime`).

    python benchmarks/python_isolation.py [--repeat 5] [--rows 200000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BIG = '''# @merge_strategy: full_refresh
# @isolation: {level}
from pyspark.sql import functions as F


def run(ctx):
    orders = ctx.ref("silver.clean_orders")
    many = orders.crossJoin(ctx.spark.range({copies}).withColumnRenamed("id", "copy"))
    return many.groupBy("customer_id").agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
'''


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def set_level(root: Path, level: str) -> None:
    for folder in ("ecommerce/pipelines/gold/country_summary", "ecommerce/pipelines/gold/orders_by_customer"):
        path = root / folder / "pipeline.py"
        lines = [line for line in path.read_text().splitlines() if not line.startswith("# @isolation:")]
        lines.insert(1, f"# @isolation: {level}")
        path.write_text("\n".join(lines) + "\n")


def first_after_start(engine, keys: list[str]) -> None:
    """The data server and the fork server stopped, started early as a long-lived process does, and waited for;
    then the first confined run, beside an in-process one."""
    from ratui.engine.isolation import data_server, fork_server

    root = engine.root
    data_server.stop_servers()
    fork_server.stop_all()
    set_level(root, "confined")
    began = time.monotonic()
    assert engine.start_data_server_early()
    early = data_server.early_start()
    early.thread.join()
    fork_server.server(engine.settings.state_dir).ready()
    print(f"the data server's early start: {time.monotonic() - began:.2f} s (in the background: a run waits only "
          "for what is left of it)")
    for level in ("confined", "none"):
        set_level(root, level)
        began = time.monotonic()
        (result,) = engine.run(engine.compile().select(keys), force=True)
        assert result.status == "success", result.error
        print(f"first run of country_summary after the early start, {level}: {time.monotonic() - began:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    from ratui.engine.facade.engine import Engine

    with tempfile.TemporaryDirectory(prefix="ratui-bench-iso-") as tmp:
        root = Path(tmp) / "sample"
        shutil.copytree(REPO / "sample_project", root,
                        ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
        (root / "ecommerce/pipelines/gold/orders_by_customer").mkdir(parents=True)
        path = root / "ecommerce/pipelines/gold/country_summary/pipeline.py"
        path.write_text(path.read_text().replace("# @merge_strategy: full_refresh",
                                                 "# @merge_strategy: full_refresh\n# @isolation: none", 1))
        engine = Engine.open(root)
        engine.run(engine.compile().select([]))  # the upstream tables (no data server started yet)
        orders = engine.query("SELECT count(*) FROM silver.clean_orders")[1][0][0]
        copies = max(1, args.rows // max(orders, 1))
        (root / "ecommerce/pipelines/gold/orders_by_customer/pipeline.py").write_text(
            BIG.format(level="none", copies=copies))
        keys = ["ecommerce.gold.country_summary", "ecommerce.gold.orders_by_customer"]
        timings: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for level in ("none", "confined"):  # warm-up: the JIT, and the data server's start (printed)
            set_level(root, level)
            began = time.monotonic()
            results = engine.run(engine.compile().select(keys[:1]), force=True)
            assert all(r.status == "success" for r in results), [r.error for r in results]
            print(f"first run of country_summary, {level}: {time.monotonic() - began:.2f} s"
                  + (" (the data server's start included)" if level == "confined" else ""))
            engine.run(engine.compile().select(keys[1:]), force=True)
        for _ in range(args.repeat):
            for level in ("none", "confined"):
                set_level(root, level)
                for key in keys:
                    began = time.monotonic()
                    (result,) = engine.run(engine.compile().select([key]), force=True)
                    assert result.status == "success", result.error
                    timings.setdefault((key, level), []).append(
                        (time.monotonic() - began, result.phases.get("build", 0) / 1000))
        first_after_start(engine, keys[:1])
        engine.close()
        print(f"{'pipeline':<40} {'level':<9} {'run (median)':>13} {'build (median)':>15}  vs in-process  extra")
        for key in keys:
            base_run = statistics.median(t[0] for t in timings[(key, "none")])
            for level in ("none", "confined"):
                runs = [t[0] for t in timings[(key, level)]]
                builds = [t[1] for t in timings[(key, level)]]
                run_median = statistics.median(runs)
                print(f"{key:<40} {level:<9} {run_median:>11.2f} s {statistics.median(builds):>13.2f} s  "
                      f"{run_median / base_run:>12.2f}x  {run_median - base_run:+.2f} s")
        print(f"orders_by_customer reads {orders * copies:,} rows ({copies} copies of {orders:,})")
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
