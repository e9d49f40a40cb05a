"""Wall time of `ratui run` over the whole sample project: cold (a new process, JVM start included) against warm
(the same process, Spark already up); a forced re-run against one where nothing changed (change detection skips
every pipeline); and the per-phase split of one warm incremental run.

    python benchmarks/sample_run.py

Prints figures and ratios; asserts nothing about time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"


def fresh_copy(base: Path, name: str) -> Path:
    dest = base / name
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def main() -> None:
    sys.path.insert(0, str(REPO))
    from ratui.engine.facade.engine import Engine

    base = Path(tempfile.mkdtemp(prefix="ratui-bench-"))
    try:
        cold_dir = fresh_copy(base, "cold")
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(cold_dir)],
                              capture_output=True, text=True, cwd=REPO)
        cold = time.monotonic() - began
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr)
            raise SystemExit("cold run failed")

        warm_dir = fresh_copy(base, "warm")
        engine = Engine.open(warm_dir)
        t = time.monotonic()
        engine.start_spark()
        spark_start = time.monotonic() - t
        keys = engine.compile().select([])
        began = time.monotonic()
        first = engine.run(keys)
        warm_first = time.monotonic() - began
        began = time.monotonic()
        second = engine.run(keys, force=True)
        warm_forced = time.monotonic() - began
        assert all(r.status == "success" for r in first + second)
        began = time.monotonic()
        unchanged = engine.run(engine.compile().select([]))
        warm_unchanged = time.monotonic() - began
        assert all(r.run_type == "skip" for r in unchanged)

        subprocess.run([sys.executable, str(warm_dir / "generate_data.py"), "--month", "4"], check=True,
                       capture_output=True)
        engine.run(engine.compile().select(["raw_orders"]))
        (inc,) = engine.run(engine.compile().select(["silver.clean_orders"]))

        print(f"sample project: {len(keys)} pipelines, 36,000 orders / 5,000 customers / 500 products / 23,400 events")
        print(f"cold  `ratui run` (new process, JVM start) : {cold:7.2f} s")
        print(f"Spark session start in-process             : {spark_start:7.2f} s")
        print(f"warm  run, empty warehouse                 : {warm_first:7.2f} s"
              f"   cold/warm = {cold / warm_first:.2f}x")
        print(f"warm  run again, forced (--force)          : {warm_forced:7.2f} s"
              f"   cold/warm = {cold / warm_forced:.2f}x")
        print(f"warm  run again, nothing changed (skips)   : {warm_unchanged:7.3f} s   "
              f"forced/unchanged = {warm_forced / max(warm_unchanged, 1e-6):.0f}x")
        print("per pipeline (warm, empty warehouse):")
        for r in first:
            print(f"  {r.pipeline:<42} {r.strategy:<13} {r.rows_written:>7} rows {r.duration_ms / 1000:6.2f} s")
        total = sum(inc.phases.values())
        print(f"warm incremental run of silver.clean_orders after a new orders file ({inc.rows_written} rows upserted, "
              f"{inc.write['files_removed']} file(s) rewritten, {inc.write['files_kept']} kept):")
        for phase, ms in inc.phases.items():
            print(f"  {phase:<8} {ms:6d} ms  {100 * ms / max(total, 1):5.1f} %")
        print(f"  total    {total:6d} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
