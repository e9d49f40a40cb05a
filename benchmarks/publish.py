"""What the branch workflow costs: an atomic publish of the whole sample against the same forced run merging
pipeline by pipeline, and the catalog operations of a dev branch against one run's own merge (its resolve phase).

    .venv/bin/python benchmarks/publish.py            # 3 rounds (median printed)
    .venv/bin/python benchmarks/publish.py --rounds 5

Spark runs in this process (local[2], warm after a first run that creates the tables). Each round of the run
comparison is a forced run of all ten sample pipelines, once plain and once with atomic=True (the same work plus a
publish branch, the runs merging into it, and one merge into main at the end). The catalog operations are timed on
the same project after the runs: branch create, diff against main, merge --dry-run, merge, log of 50 commits with
snapshot details, rollback plan and apply of one table. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = """\
namespace: ecommerce
spark:
  master: local[2]
  config:
    spark.sql.shuffle.partitions: 2
    spark.default.parallelism: 2
"""


def timed(fn):
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from ratui.engine.facade.engine import Engine

    work = Path(tempfile.mkdtemp(prefix="ratui-publish-"))
    try:
        project = work / "sample"
        shutil.copytree(ROOT / "sample_project", project,
                        ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
        (project / "ratui.yaml").write_text(SETTINGS)
        engine = Engine.open(project)
        keys = engine.compile().select([])
        first = engine.run(keys, trigger="bench")
        assert all(r.status == "success" for r in first), [(r.pipeline, r.error) for r in first]

        plain, atomic, resolve = [], [], []
        for _ in range(args.rounds):
            seconds, results = timed(lambda: engine.run(keys, trigger="bench", force=True))
            assert all(r.status == "success" for r in results)
            plain.append(seconds)
            resolve.extend(r.phases.get("resolve", 0) / 1000 for r in results)
            invocation = engine.invocation(keys, trigger="bench", force=True, atomic=True)
            seconds, results = timed(invocation.run)
            assert all(r.status == "success" for r in results) and invocation.publish.merged
            atomic.append(seconds)
        p, a = statistics.median(plain), statistics.median(atomic)
        one_merge = statistics.median(resolve)
        print(f"forced run of the {len(keys)} sample pipelines, median of {args.rounds} (Spark warm)")
        print(f"  plain (each run merges into main)     {p:7.2f} s")
        print(f"  --atomic (one publish commit on main) {a:7.2f} s   {a / p:.2f}x plain")
        print(f"\none run's resolve phase (its merge into main), median of {len(resolve)}: {one_merge * 1000:.1f} ms")

        before = engine.log("main", limit=1)[0]
        steps = [
            ("branch create dev", lambda: engine.create_branch("dev")),
            ("diff dev main", lambda: engine.diff_refs("dev")),
            ("merge dev --dry-run", lambda: engine.merge("dev", dry_run=True)),
            ("merge dev (nothing to merge)", lambda: engine.merge("dev")),
            ("log main --limit 50 (snapshots read)", lambda: engine.log("main", limit=50)),
            ("log main --limit 50 (no details)", lambda: engine.log("main", limit=50, details=False)),
            ("rollback plan, one table", lambda: engine.plan_rollback("main", before.hash, "raw_orders")),
        ]
        print(f"\ncatalog operations ({len(engine.table_pointers('main'))} tables, "
              f"{len(engine.log('main', limit=100_000, details=False))} commits on main), against that merge:")
        for name, fn in steps:
            seconds, _ = timed(fn)
            print(f"  {name:<40} {seconds * 1000:8.1f} ms   {seconds / one_merge:5.2f}x one run's merge")
        plan = engine.plan_rollback("main", first[0].run_id, first[0].pipeline)
        seconds, _ = timed(lambda: engine.rollback(plan))
        name = "rollback apply, one table"
        print(f"  {name:<40} {seconds * 1000:8.1f} ms   {seconds / one_merge:5.2f}x one run's merge")
        engine.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
