"""CSV column types found in Python (ratui/engine/landing/formats/csv_types.py) against Spark's own passes over a file.

    python benchmarks/csv_types.py

For CSV files of 0.5 to 8 MB (rows of the sample's orders file repeated) it prints, per size, the median of three
warm repetitions of: csv_types() in this process, and Spark's schema inference followed by the bad-row check ratui
runs when csv_types cannot answer (a PERMISSIVE read with the inferred schema, counting corrupt records), in a warm
JVM. Files above csv_types' limit (4 MB) are left to Spark: their Python figure is the time to say so. Also the peak
Python memory of one csv_types() call at the limit (tracemalloc, which slows that call). Timings are printed, never
asserted; check `uptime` first.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    import os

    from ratui.engine.project.settings import load_settings
    from ratui.engine.landing.formats.csv_types import MAX_BYTES, csv_types
    from ratui.engine.spark import session as spark_mod

    print("load average %.2f %.2f, %d cores" % (*os.getloadavg()[:2], os.cpu_count() or 0))
    home = Path(tempfile.mkdtemp(prefix="ratui-bench-"))
    (home / "ratui.yaml").write_text("namespace: bench\nspark:\n  config:\n    spark.sql.shuffle.partitions: 2\n")
    spark = spark_mod.get_spark(load_settings(home))
    from pyspark.sql import functions as F

    source = (REPO / "sample_project/ecommerce/landing/orders/orders_2026_01.csv").read_text().split("\n")
    header, body = source[0], [line for line in source[1:] if line]

    def make(megabytes: float) -> Path:
        lines, size, i = [header], len(header) + 1, 0
        while size + len(body[i % len(body)]) + 1 <= megabytes * (1 << 20):
            lines.append(body[i % len(body)])
            size += len(lines[-1]) + 1
            i += 1
        path = home / f"orders_{megabytes}.csv"
        path.write_text("\n".join(lines) + "\n")
        return path

    def spark_passes(path: Path) -> None:
        schema = spark.read.options(header=True, inferSchema=True).csv(str(path)).schema
        df = (spark.read.options(header=True, mode="PERMISSIVE", columnNameOfCorruptRecord="_bad")
              .schema(schema.add("_bad", "string")).csv(str(path)))
        df.where(F.col("_bad").isNotNull()).groupBy().agg(F.count(F.lit(1)), F.count(F.col(schema.names[0]))).collect()

    print(f"\n{'size':>8} {'rows':>8}  {'csv_types':>10}  {'Spark inference + bad-row check (warm)':>40}")
    for megabytes in (0.5, 1, 2, 4, 8):
        path = make(megabytes)
        python, spark_times = [], []
        for _ in range(4):  # the first of each is a warm-up
            began = time.perf_counter()
            answered = csv_types([path]) is not None
            python.append(time.perf_counter() - began)
            began = time.perf_counter()
            spark_passes(path)
            spark_times.append(time.perf_counter() - began)
        rows = sum(1 for _ in path.open()) - 1
        py_ms, spark_ms = statistics.median(python[1:]) * 1000, statistics.median(spark_times[1:]) * 1000
        print(f"{megabytes:>6} MB {rows:>8}  {py_ms:>7.0f} ms  {spark_ms:>37.0f} ms"
              + ("" if answered else "   (over the limit: left to Spark)"))
    at_limit = make(MAX_BYTES / (1 << 20) - 0.01)
    tracemalloc.start()
    csv_types([at_limit])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"\npeak Python memory of csv_types() for {at_limit.stat().st_size / 1e6:.1f} MB: {peak / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
