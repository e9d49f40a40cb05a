"""Merge cost: ratui's incremental, delete_insert and scd2 against the naive whole-table rewrite and PyIceberg's
Table.upsert, on a 1-million-row and a 10-million-row table, with the same 1% change batch (half updates of
existing keys, half new keys); a 100-row change (ratui's fixed cost per merge); and the full refresh that builds
each table against a plain Spark write of the same rows.

    /work/venv/bin/python benchmarks/merge.py                  # 10M and 1M rows, batch of 100k
    /work/venv/bin/python benchmarks/merge.py --rows 2000000 --small 200000 --skip-upsert

Every approach starts from the same table state: the base tables are written once on main, and each approach
writes on a branch of its own forked from main (a branch copies table pointers, not data). Timed is the write
itself, from reading the change batch to the committed snapshot (the median of --repeat runs, each on a branch
of its own). "files -" / "files +" are the data files the
approach removed from / added to the table (compared by path before and after), "rewritten" the removed files
that had to be read and written again.

Two layouts of the updated keys:
    spread     updated keys evenly over the whole key range: every data file holds some (worst case for
               file pruning: every file is rewritten)
    recent     updated keys are the newest 50k keys (typical of orders, events, ...): they sit in the files
               that cover the top of the key range
The naive rewrite and upsert run on both layouts too (they read or rewrite the whole table either way).
ratui picks copy-on-write or merge-on-read per file by the share of the file that changes (strategies.py);
"deletes +" counts the position-delete files a merge wrote.

Peak memory is measured apart per side: the naive rewrite and PyIceberg's upsert (which hold the whole table in
Python) each run in a fresh process of their own, whose peak RSS is printed beside their time, so the benchmark's
own process holds only ratui's work: its peak RSS ("ratui's Python driver") and the peak of the Spark driver JVM
it started (VmHWM of that process) are printed after each size.

Timings are wall-clock on whatever machine runs this; they are printed, never asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import resource
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
    spark.default.parallelism: 2
"""


def paths_of(table) -> set[str]:
    if table.current_snapshot() is None:
        return set()
    return {t.file.file_path for t in table.scan().plan_files()}


def make_data(spark, n: int, offset_seconds: int = 0):
    from pyspark.sql import functions as F

    return spark.range(n).select(
        F.col("id"),
        (F.col("id") % 100_003).alias("customer_id"),
        (F.col("id") % 9973 / 100).cast("decimal(12,2)").alias("amount"),
        F.element_at(F.array(*[F.lit(s) for s in ("placed", "paid", "shipped", "delivered", "returned")]),
                     (F.col("id") % 5 + 1).cast("int")).alias("status"),
        F.timestamp_seconds(F.lit(1_767_225_600 + offset_seconds) + F.col("id") % 86_400 * 60).alias("updated_at"),
    )


def change_batch(spark, n: int, size: int, layout: str):
    """`size // 2` updates of existing keys (spread evenly, or the newest keys) and `size // 2` new keys."""
    from pyspark.sql import functions as F

    half = size // 2
    if layout in ("spread", "tiny"):
        updates = spark.range(half).select((F.col("id") * (n // half) + 7).alias("id"))
    else:
        updates = spark.range(n - half, n)
    inserts = spark.range(n, n + half)
    ids = updates.unionByName(inserts)
    return ids.select(
        F.col("id"),
        (F.col("id") % 100_003).alias("customer_id"),
        F.lit("123.45").cast("decimal(12,2)").alias("amount"),
        F.lit("refunded").alias("status"),
        F.timestamp_seconds(F.lit(1_800_000_000) + F.col("id") % 1000).alias("updated_at"),
    )


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """The peak resident memory (VmHWM) of a process, in MB; None where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def describe_files(sizes: list[int]) -> str:
    """`12 files, 104-131 MB (mean 118 MB)` for a list of file sizes in bytes."""
    if not sizes:
        return "no files"
    mb = [size / 2**20 for size in sizes]
    return f"{len(mb)} files, {min(mb):.0f}-{max(mb):.0f} MB (mean {statistics.mean(mb):.0f} MB)"


def jvm_pid(spark) -> int | None:
    """The pid of the Spark driver JVM this process started (None with Spark Connect, or when unknown)."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return getattr(proc, "pid", None)


class Measurer:
    """Runs an approach on branches of main of its own and records its time and file counts (no Spark needed)."""

    def __init__(self, catalog, repeat: int = 1):
        self.catalog = catalog
        self.results: list[dict] = []
        self.repeat = repeat

    def measure(self, label: str, n: int, layout: str, key: str, fn) -> None:
        """`fn` on `self.repeat` branches of main of their own; the median time is reported."""
        from ratui.engine.iceberg.read import row_count

        times = []
        for attempt in range(self.repeat):
            branch = f"b{len(self.results)}-{attempt}-{os.getpid()}-" + label.replace('_', '-').replace(' ', '-')
            self.catalog.create_branch(branch)
            before = paths_of(self.catalog.load_table(branch, key))
            began = time.monotonic()
            note = fn(branch)
            times.append(time.monotonic() - began)
            table = self.catalog.load_table(branch, key)
            after = paths_of(table)
            rows = row_count(table)
            self.catalog.delete_branch(branch)
        seconds = statistics.median(times)
        removed, added = len(before - after), len(after - before)
        row = dict(table_rows=n, layout=layout, approach=label, seconds=seconds, files_before=len(before),
                   removed=removed, added=added, rewritten=note.get("rewritten", removed), rows_after=rows,
                   deletes=note.get("deletes", 0), peak_mb=peak_rss_mb())
        self.results.append(row)
        spread = f" (of {', '.join(f'{t:.2f}' for t in times)})" if len(times) > 1 else ""
        print(f"  {label:<16} {layout:<7} {seconds:7.2f}s{spread}  files {len(before)} -> {len(after)} "
              f"(-{removed} +{added}, rewritten {row['rewritten']}, deletes +{row['deletes']})  rows {rows:,}",
              flush=True)

    def naive(self, n: int, layout: str, batch_dir: str):
        """RAT's merge: read the whole table into Arrow, merge in Python, overwrite the table."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        key = f"bench.silver.orders_{n}"

        def go(branch):
            table = self.catalog.load_table(branch, key)
            existing = table.scan().to_arrow()
            batch = pq.read_table(batch_dir).cast(existing.schema)
            kept = existing.filter(pc.invert(pc.is_in(existing["id"], value_set=batch["id"])))
            table.overwrite(pa.concat_tables([kept, batch]))
            return {}

        self.measure("naive rewrite", n, layout, key, go)

    def upsert(self, n: int, layout: str, batch_dir: str):
        import pyarrow.parquet as pq

        key = f"bench.silver.orders_{n}"

        def go(branch):
            table = self.catalog.load_table(branch, key)
            batch = pq.read_table(batch_dir).cast(table.schema().as_arrow())
            result = table.upsert(batch, join_cols=["id"])
            return {"note": f"{result.rows_updated} updated, {result.rows_inserted} inserted"}

        self.measure("pyiceberg upsert", n, layout, key, go)


def _reference(db_path: str, work: str, approach: str, n: int, layout: str, batch_dir: str, repeat: int) -> dict:
    """One reference approach (naive, upsert) in a process of its own: its row, with that process's peak RSS."""
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    quiet_logs()
    measurer = Measurer(SqliteBranchCatalog(Path(db_path), Path(work)), repeat)
    getattr(measurer, approach)(n, layout, batch_dir)
    return measurer.results[0]


class Bench(Measurer):
    def __init__(self, work: Path):
        from ratui.engine.spark import jobs as spark_jobs, session as spark_mod
        from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog
        from ratui.engine.project.settings import load_settings

        self.root = work
        (work / "ratui.yaml").write_text(SETTINGS)
        self.settings = load_settings(work)
        began = time.monotonic()
        spark_mod.get_spark(self.settings)
        # the session a run writes with (its SQL settings: adaptive execution may coalesce a cached batch's
        # partitions, see spark/jobs.py), not the process's root session
        self.spark = spark_jobs.new_run_session(self.settings, "bench")
        heap = self.spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**30
        print(f"spark up in {time.monotonic() - began:.1f}s, driver heap {heap:.1f} GiB, "
              f"{os.cpu_count()} cores", flush=True)
        super().__init__(SqliteBranchCatalog(self.settings.db_path, work))
        self.full_refresh: dict[int, tuple[float, float]] = {}
        self.rss: dict[int, float] = {}
        self.jvm_rss: dict[int, float] = {}
        self.base_files: dict[int, list[int]] = {}  # file sizes (bytes) of the full refresh's table
        self.plain_files: dict[int, list[int]] = {}  # and of the plain Spark write of the same rows

    def request(self, ref: str, key: str, batch, rows: int, strategy: str, **config):
        from ratui.engine.project.config import PipelineConfig
        from ratui.engine.write.strategies import WriteRequest

        return WriteRequest(self.spark, self.catalog, ref, key, self.root, f"bench{int(time.time() * 1000)}",
                            batch, rows, PipelineConfig(merge_strategy=strategy, unique_key=("id",), **config),
                            strategy, run_started_at="2026-01-01 00:00:00.000000")

    def base(self, n: int) -> None:
        from ratui.engine.iceberg.read import data_files
        from ratui.engine.write.strategies import write

        for name, strategy in ((f"orders_{n}", "full_refresh"), (f"dim_{n}", "scd2")):
            if strategy == "full_refresh":  # the reference first too, so neither runs on a colder JVM
                began = time.monotonic()
                make_data(self.spark, n).write.mode("overwrite").parquet(str(self.root / "plain" / f"{n}-a"))
                plain_first = time.monotonic() - began
            began = time.monotonic()
            out = write(self.request("main", f"bench.silver.{name}", make_data(self.spark, n), None, strategy))
            seconds = time.monotonic() - began
            self.catalog.record_commit("main", f"base {name}")
            line = f"  base {name} ({strategy}): {out.table_rows:,} rows in {out.files_added} files, {seconds:.2f}s"
            if strategy == "full_refresh":
                began = time.monotonic()
                make_data(self.spark, n).write.mode("overwrite").parquet(str(self.root / "plain" / f"{n}-b"))
                plain = (plain_first + time.monotonic() - began) / 2
                line += f"; plain Spark write of the same rows {plain:.2f}s (mean of one before, one after): " \
                        f"{seconds / plain:.2f}x"
                self.full_refresh[n] = (seconds, plain)
                self.base_files[n] = sorted(f.file_size_in_bytes for f in
                                            data_files(self.catalog.load_table("main", f"bench.silver.{name}")))
                plain_dir = self.root / "plain" / f"{n}-b"
                self.plain_files[n] = sorted(p.stat().st_size for p in plain_dir.glob("*.parquet"))
                line += f"\n    files: ratui {describe_files(self.base_files[n])}; " \
                        f"plain Spark {describe_files(self.plain_files[n])}"
            print(line, flush=True)

    def stage_batch(self, n: int, size: int, layout: str) -> str:
        folder = self.root / "batches" / f"{n}-{layout}"
        change_batch(self.spark, n, size, layout).coalesce(1).write.mode("overwrite").parquet(str(folder))
        return str(folder)

    def ratui(self, strategy: str, n: int, layout: str, batch_dir: str, size: int):
        from ratui.engine.write.strategies import write

        key = f"bench.silver.{'dim' if strategy == 'scd2' else 'orders'}_{n}"

        def go(branch):
            out = write(self.request(branch, key, self.spark.read.parquet(batch_dir), size, strategy))
            return {"rewritten": out.files_rewritten, "deletes": out.delete_files_added}

        self.measure(f"ratui {strategy}", n, layout, key, go)

    def reference(self, approach: str, n: int, layout: str, batch_dir: str) -> None:
        """The naive rewrite or PyIceberg's upsert in a fresh process of its own (its memory is not this one's)."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            row = pool.submit(_reference, str(self.settings.db_path), str(self.root), approach, n, layout,
                              batch_dir, self.repeat).result()
        self.results.append(row)
        print(f"  {'':<16} {'':<7} (in a process of its own: peak RSS {row['peak_mb']:.0f} MB)", flush=True)

    def naive(self, n: int, layout: str, batch_dir: str):
        self.reference("naive", n, layout, batch_dir)

    def upsert(self, n: int, layout: str, batch_dir: str):
        self.reference("upsert", n, layout, batch_dir)

    def driver_peaks(self, n: int) -> None:
        """This process's peak RSS (ratui's work alone: the references ran elsewhere) and the Spark driver JVM's."""
        self.rss[n] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        pid = jvm_pid(self.spark)
        jvm = peak_rss_mb(pid) if pid else None
        if jvm is not None:
            self.jvm_rss[n] = jvm
        print(f"  peak RSS so far: ratui's Python driver {self.rss[n]:.0f} MB"
              + (f", Spark driver JVM {jvm:.0f} MB" if jvm is not None else "")
              + " (the naive rewrite and upsert ran in processes of their own)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the large table")
    parser.add_argument("--small", type=int, default=1_000_000, help="rows of the small table (0: skip)")
    parser.add_argument("--batch", type=int, default=None, help="change batch rows (default 1%% of --rows)")
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    parser.add_argument("--skip-upsert", action="store_true", help="skip PyIceberg's upsert (the slowest)")
    parser.add_argument("--repeat", type=int, default=3, help="times each approach runs per figure (median)")
    parser.add_argument("--warmup", type=int, default=200_000,
                        help="rows of an untimed warm-up round of every approach (0: none); a fresh JVM runs "
                             "its first merge 2-3x slower")
    args = parser.parse_args()
    size = args.batch or args.rows // 100
    work = args.work or Path(tempfile.mkdtemp(prefix="ratui-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    quiet_logs()
    bench = Bench(work)
    try:
        if args.warmup:
            print(f"\nwarm-up on {args.warmup:,} rows (not reported)", flush=True)
            bench.base(args.warmup)
            batch_dir = bench.stage_batch(args.warmup, args.warmup // 100, "spread")
            for strategy in ("incremental", "delete_insert", "scd2"):
                bench.ratui(strategy, args.warmup, "spread", batch_dir, args.warmup // 100)
            bench.naive(args.warmup, "spread", batch_dir)
            if not args.skip_upsert:
                bench.upsert(args.warmup, "spread", batch_dir)
            bench.results.clear()
        bench.repeat = args.repeat
        for n in ([args.small] if args.small else []) + [args.rows]:
            print(f"\n{n:,}-row table, change batch {size:,} rows ({size // 2:,} updates + {size // 2:,} new keys)",
                  flush=True)
            bench.base(n)
            for layout in ("spread", "recent"):
                batch_dir = bench.stage_batch(n, size, layout)
                for strategy in ("incremental", "delete_insert", "scd2"):
                    bench.ratui(strategy, n, layout, batch_dir, size)
                bench.naive(n, layout, batch_dir)
                if not args.skip_upsert:
                    bench.upsert(n, layout, batch_dir)
            tiny_dir = bench.stage_batch(n, 100, "tiny")
            bench.ratui("incremental", n, "tiny", tiny_dir, 100)
            bench.driver_peaks(n)
        report(bench.results)
        goals(bench, args)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def quiet_logs() -> None:
    import logging

    logging.getLogger("pyiceberg").setLevel(logging.ERROR)


def report(results: list[dict]) -> None:
    print("\n| table rows | keys | approach | seconds | vs naive | vs upsert | files before | removed | "
          "rewritten | added |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        naive = next((x["seconds"] for x in results if x["table_rows"] == r["table_rows"]
                      and x["approach"] == "naive rewrite"), None)
        upsert = next((x["seconds"] for x in results if x["table_rows"] == r["table_rows"]
                       and x["approach"] == "pyiceberg upsert"), None)
        ratio = lambda base, r=r: f"{r['seconds'] / base:.2f}x" if base else "-"  # noqa: E731
        print(f"| {r['table_rows']:,} | {r['layout']} | {r['approach']} | {r['seconds']:.2f} | {ratio(naive)} | "
              f"{ratio(upsert)} | {r['files_before']} | {r['removed']} | {r['rewritten']} | {r['added']} |")
    sizes = sorted({r["table_rows"] for r in results})
    if len(sizes) == 2:
        small, large = sizes
        print(f"\ngrowth from {small:,} to {large:,} rows ({large // small}x the table), same batch:")
        for layout in ("spread", "recent"):
            for approach in dict.fromkeys(r["approach"] for r in results):
                a = [r for r in results if r["approach"] == approach and r["table_rows"] == small
                     and r["layout"] == layout]
                b = [r for r in results if r["approach"] == approach and r["table_rows"] == large
                     and r["layout"] == layout]
                if a and b:
                    a, b = a[0], b[0]
                    print(f"  {layout:<7} {approach:<18} {a['seconds']:7.2f}s -> {b['seconds']:7.2f}s "
                          f"({b['seconds'] / a['seconds']:.1f}x), rewritten files {a['rewritten']} -> "
                          f"{b['rewritten']}")


def goals(bench: Bench, args) -> None:
    """The figures issue 11 asks for, each beside its reference from this same run."""
    def seconds(n, layout, approach):
        found = [r["seconds"] for r in bench.results if r["table_rows"] == n and r["layout"] == layout
                 and r["approach"] == approach]
        return found[0] if found else None

    big, small = args.rows, args.small
    print("\ngoals (reference in brackets, same run):")
    tiny = seconds(big, "tiny", "ratui incremental")
    if tiny is not None:
        print(f"  100-row change into {big:,} rows: {tiny:.2f} s  [goal: at most 0.8 s]")
    for layout, what in (("recent", "clustered"), ("spread", "spread")):
        inc, naive = seconds(big, layout, "ratui incremental"), seconds(big, layout, "naive rewrite")
        upsert = seconds(big, layout, "pyiceberg upsert")
        if inc and naive:
            line = f"  {what} 1% change into {big:,}: {inc:.2f} s, {naive / inc:.2f}x faster than naive [{naive:.2f} s]"
            if upsert:
                line += f", {upsert / inc:.1f}x faster than upsert [{upsert:.2f} s]"
            print(line)
    if small:
        a, b = seconds(small, "spread", "ratui incremental"), seconds(big, "spread", "ratui incremental")
        if a and b:
            print(f"  spread 1% change, {small:,} -> {big:,} rows: {a:.2f} s -> {b:.2f} s ({b / a:.2f}x) "
                  "[goal: within 2x]")
    for n, (ratui_s, plain) in sorted(bench.full_refresh.items()):
        print(f"  full refresh of {n:,} rows: {ratui_s:.2f} s, {ratui_s / plain:.2f}x the plain Spark write "
              f"[{plain:.2f} s; goal: at most 1.1x]")
    for n, rss in sorted(bench.rss.items()):
        jvm = bench.jvm_rss.get(n)
        print(f"  peak RSS after the {n:,}-row runs: ratui's Python driver {rss:.0f} MB"
              + (f", Spark driver JVM {jvm:.0f} MB" if jvm is not None else ""))
    for n in sorted({r["table_rows"] for r in bench.results}):
        refs = [f"{r['approach']} {r['layout']} {r['peak_mb']:.0f} MB" for r in bench.results
                if r["table_rows"] == n and r["approach"] in ("naive rewrite", "pyiceberg upsert")
                and r.get("peak_mb") is not None]
        if refs:
            print(f"  reference processes' peak RSS at {n:,} rows: {', '.join(refs)}")


if __name__ == "__main__":
    main()

