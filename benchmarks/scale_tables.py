"""Scale, tables: merge.py's measurements at --small and --rows rows (issue 34).

    python benchmarks/scale.py --only tables --small 1000000 --rows 10000000 --repeat 1
    python benchmarks/scale.py --only tables --rows 100000000 --small 10000000   # by hand, a big machine

Per size: the full refresh that builds the table against a plain Spark write of the same rows (time, and the
number and sizes of the files each writes: ratui aims at its target file size, write/files.py), a 1% change
(half updates, half new keys) merged by incremental with the updated keys spread over every file and clustered at
the top of the key range, the same spread change through scd2 (goal: within 1.5x of incremental), the naive
whole-table rewrite as the reference (in a process of its own), and the peak RSS of ratui's own Python driver
and Spark driver JVM apart from that reference's.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.scale import Figure

# merge.py's warm-up size: a 1%-change batch of more than 1,000 keys (a batch of at most 1,000 spread keys pushes a
# 1,000-value IN filter into the Parquet reader, whose task then fails with StackOverflowError and takes the JVM down:
# found here, reported, not fixed in this change)
WARMUP = 200_000


def figures(args, workdir: Path) -> list[Figure]:
    from benchmarks.merge import Bench, describe_files, quiet_logs

    workdir.mkdir(parents=True, exist_ok=True)
    quiet_logs()
    bench = Bench(workdir)
    out: list[Figure] = []
    # an untimed round first: a fresh JVM runs its first merges 2-3x slower
    bench.base(WARMUP)
    warm = bench.stage_batch(WARMUP, WARMUP // 100, "spread")
    for strategy in ("incremental", "scd2"):
        bench.ratui(strategy, WARMUP, "spread", warm, WARMUP // 100)
    bench.results.clear()
    bench.repeat = args.repeat
    for n in [s for s in (args.small, args.rows) if s]:
        size = max(100, n // 100)
        print(f"\n{n:,}-row table, change batch {size:,} rows", flush=True)
        bench.base(n)
        for layout in ("spread", "recent"):
            batch = bench.stage_batch(n, size, layout)
            bench.ratui("incremental", n, layout, batch, size)
            if layout == "spread":
                bench.ratui("scd2", n, layout, batch, size)
                bench.naive(n, layout, batch)
        bench.driver_peaks(n)

        def row(approach: str, layout: str, n: int = n) -> dict:
            return next(r for r in bench.results if r["table_rows"] == n and r["approach"] == approach
                        and r["layout"] == layout)

        ratui_s, plain = bench.full_refresh[n]
        out.append(Figure("full refresh (ratui)", n, "rows", ratui_s, goal=1.1 * plain,
                          note=f"plain Spark write {plain:.2f} s ({ratui_s / plain:.2f}x, goal 1.1x); "
                               f"ratui {describe_files(bench.base_files[n])}; "
                               f"plain {describe_files(bench.plain_files[n])}"))
        inc = row("ratui incremental", "spread")
        for layout, what in (("spread", "spread"), ("recent", "clustered")):
            r = row("ratui incremental", layout)
            out.append(Figure(f"incremental 1% {what}", n, "rows", r["seconds"],
                              note=_files(r)))
        scd2 = row("ratui scd2", "spread")
        out.append(Figure("scd2 1% spread", n, "rows", scd2["seconds"], goal=1.5 * inc["seconds"],
                          note=f"{scd2['seconds'] / inc['seconds']:.2f}x incremental spread (goal 1.5x); "
                               + _files(scd2)))
        naive = row("naive rewrite", "spread")
        out.append(Figure("naive rewrite 1% spread (reference)", n, "rows", naive["seconds"],
                          note=f"own process, peak RSS {naive['peak_mb']:.0f} MB"))
        jvm = bench.jvm_rss.get(n)
        out.append(Figure("ratui peak RSS (MB, not seconds)", n, "rows", bench.rss[n],
                          note=f"ratui's Python driver {bench.rss[n]:.0f} MB"
                               + (f", Spark driver JVM {jvm:.0f} MB" if jvm is not None else "")
                               + f"; the naive reference's own process {naive['peak_mb']:.0f} MB"))
    return out


def _files(r: dict) -> str:
    return (f"files {r['files_before']}: -{r['removed']} (rewritten {r['rewritten']}) +{r['added']}, "
            f"delete files +{r['deletes']}")
