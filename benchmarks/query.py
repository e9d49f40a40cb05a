"""The Query screen's first page: how long the first page of a large result takes once Spark is warm, and that the
console's memory does not grow with the result's size.

    .venv/bin/python benchmarks/query.py                 # 1M and 10M rows
    .venv/bin/python benchmarks/query.py --rows 2000000 --small 200000

Two tables are built once (full_refresh pipelines over range(): id, a key, a label, a double). For each size,
the same calls the console makes (Engine.open_query + QueryResult.page(0, PAGE_SIZE), then four more pages)
are timed, median of 3, with the process's RSS before and after. References measured in the same run:
    plain Spark   the same table's Parquet files read by Spark and `.limit(PAGE_SIZE).collect()`: Spark's floor
    naive         the whole result brought into Python (`toArrow()`), what a viewer that loads everything pays
Timings are printed, never asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
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

PIPELINE = """\
-- @merge_strategy: full_refresh
SELECT id, CAST(id % 1000 AS INT) AS k, concat('row-', CAST(id AS STRING)) AS label, rand(42) AS x
FROM range(0, {rows})
"""


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 1e6


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--small", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the temporary project")
    args = parser.parse_args()

    from ratui.console.data import PAGE_SIZE
    from ratui.engine.iceberg.read import data_files
    from ratui.engine.locations import local_file
    from ratui.engine.facade.engine import Engine
    from ratui.engine.spark import session as spark_mod

    root = Path(tempfile.mkdtemp(prefix="ratui-query-bench-")) / "proj"
    sizes = {"small": args.small, "large": args.rows}
    (root / "bench/pipelines/silver").mkdir(parents=True)
    (root / "ratui.yaml").write_text(SETTINGS)
    for name, rows in sizes.items():
        folder = root / f"bench/pipelines/silver/{name}"
        folder.mkdir()
        (folder / "pipeline.sql").write_text(PIPELINE.format(rows=rows))
    try:
        engine = Engine.open(root)
        started = time.perf_counter()
        results = engine.run(engine.compile().select([]))
        assert all(r.status == "success" for r in results), [(r.key, r.status, r.error) for r in results]
        print(f"built {args.small:,} and {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
        spark = spark_mod.get_spark(engine.settings)
        warm = engine.open_query("SELECT count(*) FROM silver.small")  # Spark warm: classes loaded, JIT going
        warm.page(0, 1)
        warm.close()

        print(f"\nfirst page of {PAGE_SIZE} rows (median of 3), Spark warm; RSS of this process")
        print(f"{'rows':>12}  {'ratui page 1':>12}  {'5 pages':>8}  {'plain Spark':>11}  {'ratio':>6}  "
              f"{'RSS +MB':>7}  {'naive toArrow':>13}  {'its RSS +MB':>11}")
        for name, rows in sizes.items():
            table = engine.state.catalog.load_table("main", f"bench.silver.{name}")
            files = [local_file(table, f.file_path) for f in data_files(table)]
            sql = f"SELECT * FROM silver.{name}"

            def first_page(sql=sql):
                result = engine.open_query(sql)
                try:
                    return result.page(0, PAGE_SIZE)
                finally:
                    result.close()

            before = rss_mb()
            ratui_s, (rows_got, more) = timed(first_page)
            assert len(rows_got) == PAGE_SIZE and more

            result = engine.open_query(sql)
            started = time.perf_counter()
            for page in range(5):
                result.page(page * PAGE_SIZE, PAGE_SIZE)
            pages_s = time.perf_counter() - started
            result.close()
            ratui_rss = rss_mb() - before

            plain_s, _ = timed(lambda files=files: spark.read.parquet(*files).limit(PAGE_SIZE).collect())

            gc.collect()
            before = rss_mb()
            naive_s, arrow = timed(lambda files=files: spark.read.parquet(*files).toArrow(), repeat=1)
            naive_rss = rss_mb() - before
            del arrow
            gc.collect()
            print(f"{rows:>12,}  {ratui_s:>10.3f} s  {pages_s:>6.2f} s  {plain_s:>9.3f} s  "
                  f"{ratui_s / plain_s:>5.2f}x  {ratui_rss:>7.1f}  {naive_s:>11.2f} s  {naive_rss:>11.1f}")
        print("\nratio: ratui's first page / plain Spark's limit().collect() of the same files")
        engine.close()
    finally:
        if args.keep:
            print(f"project kept at {root}")
        else:
            shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
