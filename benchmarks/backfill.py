"""Backfills (issue 50): planning a 10,000-interval backfill, and the cost of an interval run beside a plain
incremental run of the same rows, in the same sitting.

    python benchmarks/backfill.py [ROWS_PER_DAY]   # default 10000 (90 days of events: 900,000 rows)

1. Planning: `ratui backfill` of 10,000 hourly intervals, from a compiled project (no Spark): the plan, and a walk of
   every interval; beside the reference of materialising the same intervals as a list of (key, start, end) tuples
   (what a naive planner holds), with each one's peak Python memory.
2. Runs: a 90-day fact table filled by a backfill; then, median of 5 each, one day's interval run again (delete the
   day's rows, insert the result) beside a plain `incremental` run (upsert on event_id) of the same day's rows into a
   table holding the same 90 days. Both are forced runs in this process's warm Spark. Timings are printed, never
   asserted; `uptime` is printed first.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SETTINGS = """\
namespace: demo
spark:
  master: local[2]
  config:
    spark.sql.shuffle.partitions: 2
    spark.default.parallelism: 2
"""

EVENTS = """\
-- @merge_strategy: full_refresh
SELECT id AS event_id,
       timestamp_seconds(1767225600 + CAST(id * {step} AS BIGINT)) AS event_ts,
       CAST(id % 97 AS DOUBLE) AS amount
FROM range(0, {rows})
"""

BY_TIME = """\
-- @merge_strategy: incremental_by_time
-- @time_column: event_ts
-- @batch: {batch}
SELECT event_id, event_ts, amount * 2 AS amount2 FROM {{{{ ref('bronze.events') }}}}
WHERE event_ts >= TIMESTAMP '{{{{ start }}}}' AND event_ts < TIMESTAMP '{{{{ end }}}}'
"""

UPSERT = """\
-- @merge_strategy: incremental
-- @unique_key: event_id
SELECT event_id, event_ts, amount * 2 AS amount2 FROM {{{{ ref('bronze.events') }}}}
{where}
"""


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def planning() -> None:
    from ratui.engine.project import intervals
    from ratui.engine.project.compiler import compile_project
    from ratui.engine.project.settings import load_settings
    from ratui.engine.run import backfill

    root = Path(tempfile.mkdtemp(prefix="ratui-bench-plan-"))
    write(root, {"ratui.yaml": SETTINGS, "demo/pipelines/bronze/events/pipeline.sql": EVENTS.format(step=1, rows=1),
                 "demo/pipelines/silver/hourly/pipeline.sql": BY_TIME.format(batch="hour")})
    compiled = compile_project(root, load_settings(root))
    keys = compiled.select(["silver.hourly"])
    start = datetime(2026, 1, 1)
    end = intervals.step(start, "hour", 10_000)

    def plan():
        return backfill.plan(compiled, keys, start, end, done_of=lambda key: [])

    times = []
    for _ in range(5):
        began = time.perf_counter()
        p = plan()
        times.append(time.perf_counter() - began)
    tracemalloc.start()
    began = time.perf_counter()
    walked = sum(1 for _ in plan().items())
    walk_s = time.perf_counter() - began
    walk_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    tracemalloc.start()
    began = time.perf_counter()
    naive = [(key, a, b) for key in keys for a, b in intervals.walk([(start, end)], "hour")]
    naive_s = time.perf_counter() - began
    naive_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"plan of {p.todo:,} hourly intervals: {statistics.median(times) * 1000:.2f} ms (median of 5)")
    print(f"  walking it: {walked:,} intervals in {walk_s * 1000:.1f} ms, peak {walk_peak / 1024:.0f} KiB")
    print(f"  reference, the same intervals as a list: {len(naive):,} in {naive_s * 1000:.1f} ms, "
          f"peak {naive_peak / 1024:.0f} KiB")
    shutil.rmtree(root, ignore_errors=True)


def runs(per_day: int) -> None:
    from ratui.engine.facade.engine import Engine

    root = Path(tempfile.mkdtemp(prefix="ratui-bench-backfill-"))
    rows = per_day * 90
    day = "WHERE event_ts >= TIMESTAMP '2026-02-10' AND event_ts < TIMESTAMP '2026-02-11'"
    write(root, {"ratui.yaml": SETTINGS,
                 "demo/pipelines/bronze/events/pipeline.sql": EVENTS.format(step=86400 / per_day, rows=rows),
                 "demo/pipelines/silver/by_time/pipeline.sql": BY_TIME.format(batch="day"),
                 "demo/pipelines/silver/upsert/pipeline.sql": UPSERT.format(where="")})
    engine = Engine.open(root)
    try:
        keys = engine.compile().select(["bronze.events", "silver.upsert"])
        assert all(r.status == "success" for r in engine.run(keys))
        began = time.perf_counter()
        filled = engine.backfill(engine.compile().select(["silver.by_time"]), "2026-01-01", "2026-04-01").run()
        fill_s = time.perf_counter() - began
        print(f"backfill of 90 day intervals ({rows:,} rows): {fill_s:.1f} s, {fill_s / 90:.2f} s an interval "
              f"({filled.done} done, {filled.failed} failed)")
        write(root, {"demo/pipelines/silver/upsert/pipeline.sql": UPSERT.format(where=day)})
        interval, upsert = [], []
        for _ in range(5):
            began = time.perf_counter()
            one = engine.backfill(engine.compile().select(["silver.by_time"]), "2026-02-10", "2026-02-11").run()
            interval.append(time.perf_counter() - began)
            assert one.done == 1 and one.rows == per_day, one.to_dict()
            began = time.perf_counter()
            [result] = engine.run(engine.compile().select(["silver.upsert"]), force=True)
            upsert.append(time.perf_counter() - began)
            assert result.status == "success" and result.rows_written == per_day, result
        print(f"one day's interval again ({per_day:,} rows into {rows:,}): {statistics.median(interval):.2f} s "
              f"(median of 5; {', '.join(f'{t:.2f}' for t in interval)})")
        print(f"  reference, a plain incremental run upserting the same {per_day:,} rows: "
              f"{statistics.median(upsert):.2f} s ({', '.join(f'{t:.2f}' for t in upsert)})")
    finally:
        engine.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    planning()
    runs(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)


if __name__ == "__main__":
    main()
