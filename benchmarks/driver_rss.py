"""The driver's memory does not grow with the data: ratui's peak RSS writing and merging 1M and 10M rows, each size in
a process of its own, beside the naive approach (the table brought into the driver as Arrow) measured after it in
the same process.

    .venv/bin/python benchmarks/driver_rss.py                   # 1M and 10M rows
    .venv/bin/python benchmarks/driver_rss.py --sizes 200000 2000000

In each child process: Spark is started and warmed (the baseline peak RSS), then `ratui run` of a full_refresh
pipeline over range(N) (4 columns), then an incremental merge of a 1% change (half updates, half new keys) into it;
the process's peak RSS (ru_maxrss, which never goes down) is read after each step. Last, the naive reference:
`toArrow()` of the table into the driver, and the peak after it. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = """\
namespace: bench
spark:
  master: local[2]
  config:
    spark.driver.memory: 4g
    spark.sql.shuffle.partitions: 8
"""

TABLE = """\
-- @merge_strategy: incremental
-- @unique_key: id
SELECT id, CAST(id % 1000 AS INT) AS k, concat('row-', CAST(id AS STRING)) AS label, {value} AS v
FROM range({start}, {stop})
"""


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def child(rows: int) -> dict:
    from ratui.engine.facade.engine import Engine
    from ratui.engine.spark import session as spark_mod

    root = Path(tempfile.mkdtemp(prefix="ratui-rss-")) / "proj"
    folder = root / "bench/pipelines/silver/t"
    folder.mkdir(parents=True)
    (root / "ratui.yaml").write_text(SETTINGS)
    sql = folder / "pipeline.sql"
    try:
        engine = Engine.open(root)
        spark = spark_mod.get_spark(engine.settings)
        spark.range(1000).selectExpr("sum(id)").collect()
        out = {"rows": rows, "baseline": peak_mb()}
        sql.write_text(TABLE.format(value="rand(1)", start=0, stop=rows))
        started = time.perf_counter()
        result = engine.run(["bench.silver.t"], full_refresh=True)[0]
        assert result.status == "success", result.error
        out["write_s"], out["write"] = time.perf_counter() - started, peak_mb()
        change = rows // 100
        sql.write_text(TABLE.format(value="rand(2)", start=rows - change // 2, stop=rows + change // 2))
        started = time.perf_counter()
        result = engine.run(["bench.silver.t"], force=True)[0]
        assert result.status == "success", result.error
        out["merge_s"], out["merge"] = time.perf_counter() - started, peak_mb()
        table = engine.state.catalog.load_table("main", "bench.silver.t")
        from ratui.engine.iceberg.read import read_table

        started = time.perf_counter()
        arrow = read_table(spark, table).toArrow()
        out["naive_s"], out["naive"], out["table_rows"] = time.perf_counter() - started, peak_mb(), arrow.num_rows
        engine.close()
        return out
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    print("driver peak RSS (MB), a new process per size: Spark warm, then ratui's full refresh, then its merge of a "
          "1% change;\nthe naive reference (the table into the driver as Arrow) measured last in the same process\n")
    print(f"{'rows':>12}  {'Spark warm':>10}  {'ratui write':>11}  {'ratui merge':>11}  {'growth':>7}  "
          f"{'naive toArrow':>13}  {'write s':>7}  {'merge s':>7}")
    results = []
    for rows in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--child", str(rows)], capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            print(f"{rows:>12,}  failed: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(lines[-1])
        results.append(r)
        growth = r["merge"] - r["baseline"]
        print(f"{rows:>12,}  {r['baseline']:>10.0f}  {r['write']:>11.0f}  {r['merge']:>11.0f}  {growth:>+7.0f}  "
              f"{r['naive']:>13.0f}  {r['write_s']:>7.2f}  {r['merge_s']:>7.2f}")
    if len(results) >= 2:
        small, large = results[0], results[-1]
        print(f"\nratui's peak from {small['rows']:,} to {large['rows']:,} rows: {small['merge']:.0f} -> "
              f"{large['merge']:.0f} MB ({large['merge'] / small['merge']:.2f}x); the naive approach: "
              f"{small['naive']:.0f} -> {large['naive']:.0f} MB ({large['naive'] / small['naive']:.2f}x)")


if __name__ == "__main__":
    main()
