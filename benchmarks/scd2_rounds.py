"""scd2 against incremental on the same 1% spread change, interleaved rounds (issue 34): medians, less noisy than
scale.py's one measurement each.

    python benchmarks/scd2_rounds.py 10000000 5      # rows, rounds; the tables are kept in --work between runs
    python benchmarks/scd2_rounds.py 100000000 2 --naive   # and the naive rewrite in each round (its own process)

Each round merges the change once by incremental (into the full-refresh table, as scale.py does), once by scd2 and
once by incremental into the scd2 table itself (the same files, so the layout is not part of the ratio), each on a
branch of main of its own; with --naive also the naive whole-table rewrite of the change (merge.py's reference, in
a process of its own). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from benchmarks.merge import Bench, quiet_logs

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", type=int)
    parser.add_argument("rounds", type=int, nargs="?", default=5)
    parser.add_argument("--work", type=Path, default=None, help="where the tables live (default: /tmp/ratui-scd2-N)")
    parser.add_argument("--naive", action="store_true", help="the naive rewrite too, in each round")
    parser.add_argument("--warm", type=int, default=2, help="untimed rounds first (a fresh JVM merges 2-3x slower)")
    args = parser.parse_args()
    n, size = args.rows, max(100, args.rows // 100)
    work = args.work or Path(f"/tmp/ratui-scd2-{n}")
    fresh = not work.exists()
    work.mkdir(parents=True, exist_ok=True)
    quiet_logs()
    bench = Bench(work)
    if fresh:
        bench.base(n)
        bench.stage_batch(n, size, "spread")
    batch = str(work / "batches" / f"{n}-spread")

    def incremental_on_dim() -> None:
        from ratui.engine.write.strategies import write

        key = f"bench.silver.dim_{n}"

        def go(branch):
            out = write(bench.request(branch, key, bench.spark.read.parquet(batch), size, "incremental"))
            return {"rewritten": out.files_rewritten, "deletes": out.delete_files_added}

        bench.measure("incremental on dim", n, "spread", key, go)

    for _ in range(args.warm):  # warm: a fresh JVM runs its first merges 2-3x slower
        bench.ratui("incremental", n, "spread", batch, size)
        bench.ratui("scd2", n, "spread", batch, size)
        incremental_on_dim()
    bench.results.clear()
    for _ in range(args.rounds):
        bench.ratui("incremental", n, "spread", batch, size)
        bench.ratui("scd2", n, "spread", batch, size)
        incremental_on_dim()
        if args.naive:
            bench.naive(n, "spread", batch)

    def median(approach: str) -> float:
        return statistics.median(r["seconds"] for r in bench.results if r["approach"] == approach)

    inc, scd2, dim = median("ratui incremental"), median("ratui scd2"), median("incremental on dim")
    print(f"\n{n:,} rows, {args.rounds} rounds: incremental {inc:.2f} s, scd2 {scd2:.2f} s ({scd2 / inc:.2f}x); "
          f"incremental into the scd2 table {dim:.2f} s (scd2 {scd2 / dim:.2f}x that)"
          + (f"; naive rewrite {median('naive rewrite'):.2f} s (incremental {inc / median('naive rewrite'):.2f}x "
             "that)" if args.naive else ""))


if __name__ == "__main__":
    main()
