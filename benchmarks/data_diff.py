"""A run's data diff computed in process (PyIceberg reads, no Spark job) beside the same diff as one Spark job, on
tables of several sizes (issue 35's diff; what `diff.in_process_rows` chooses between).

    python benchmarks/data_diff.py                      # 1k, 10k, 100k, 200k, 500k rows a side; 5 rounds each
    python benchmarks/data_diff.py --rows 100000 --rounds 9

Each size: a keyed table of five columns written by a run, then a second run that removes 1% of the rows, changes
1% and adds 1%; both diffs of main against the first run's state, interleaved, after one warm round each. Prints the
medians, their ratio, and the Spark job's plain `count()` of the same table as the floor of any Spark job. Figures
are printed, never asserted; both ways must agree on every count (checked).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEY = "bench.silver.people"
PATH = "bench/pipelines/silver/people/pipeline.sql"


def sql(rows: int, second: bool) -> str:
    change = ("WHERE id % 100 != 1" if second else "")
    score = "CASE WHEN id % 100 = 2 THEN id * 2.5 ELSE id * 1.5 END" if second else "id * 1.5"
    extra = rows // 100 if second else 0
    return ("-- @merge_strategy: full_refresh\n-- @unique_key: id\n"
            f"SELECT id, concat('n', CAST(id % 1000 AS STRING)) AS name, CAST({score} AS DOUBLE) AS score, "
            "date_add(DATE'2026-01-01', CAST(id % 365 AS INT)) AS day, id % 7 = 0 AS flag "
            f"FROM range({rows + extra}) {change}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000, 10_000, 100_000, 200_000, 500_000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from benchmarks.merge import quiet_logs
    from ratui.engine.facade.engine import Engine

    quiet_logs()
    print(f"load: {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'rows a side':>12} {'in process':>11} {'Spark job':>10} {'ratio':>6} {'count()':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        root.mkdir()
        (root / "ratui.yaml").write_text("namespace: bench\n")
        engine = Engine.open(root)
        try:
            for n in args.rows:
                measure(engine, root, n, args.rounds)
        finally:
            engine.close()


def measure(engine, root: Path, n: int, rounds: int) -> None:
    from ratui.engine.iceberg.read import read_table
    from ratui.engine.run import data_diff
    from ratui.engine.spark import session as spark_mod

    key, path = f"{KEY}_{n}", root / PATH.replace("people", f"people_{n}")
    path.parent.mkdir(parents=True)
    path.write_text(sql(n, False))
    [first] = engine.run([key])
    assert first.status == "success", first.error
    fork = engine.state.catalog.table_pointers("main")[key]
    path.write_text(sql(n, True))
    [second] = engine.run([key])
    assert second.status == "success", second.error
    before = engine.state.catalog.static_table(fork)
    after = engine.state.catalog.load_table("main", key)
    session = spark_mod.get_spark(engine.settings)
    ways = {"local": lambda: data_diff.compute(session, key, before, after, ("id",), 10 ** 9, 10 ** 9),
            "spark": lambda: data_diff.compute(session, key, before, after, ("id",), 10 ** 9, 0),
            "count": lambda: read_table(session, after).count()}
    times: dict[str, list[float]] = {k: [] for k in ways}
    results = {}
    for i in range(rounds + 1):
        for name, fn in ways.items():
            began = time.perf_counter()
            results[name] = fn()
            if i:  # the first round warms
                times[name].append(time.perf_counter() - began)
    a, b = results["local"].to_dict(), results["spark"].to_dict()
    assert a["method"] == "in_process" and b["method"] == "spark"
    for d in (a, b):  # distinct counts: exact in process, HyperLogLog++ estimates (5%) in the Spark job
        d["method"] = None
        for c in d["columns"]:
            c["distinct_before"] = c["distinct_after"] = None
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), "the two ways disagree"
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n:>12,} {med['local']:>10.3f}s {med['spark']:>9.3f}s {med['local'] / med['spark']:>6.2f} "
          f"{med['count']:>7.3f}s", flush=True)


if __name__ == "__main__":
    main()
