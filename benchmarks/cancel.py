"""Cancel latency: from the cancel request to the run ending `cancelled` (branch deleted, main unchanged).

    python benchmarks/cancel.py [--repeat 3]

(a) in-process, in the middle of a long Spark job; (b) at a phase boundary (requested as `quality` starts);
(c) from another process through the database (`ratui cancel`), polled by the running process. The baseline is
Spark's own job-group cancellation of the same job with no ratui around it. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SLOW = "SELECT a.id, count(*) AS n FROM range(0, 60000000) a CROSS JOIN range(0, 30) b GROUP BY a.id\n"
SETTINGS = "namespace: demo\nspark:\n  master: local[2]\n  config:\n    spark.sql.shuffle.partitions: 2\n"


def project(base: Path, name: str) -> Path:
    root = base / name
    (root / "demo/pipelines/bronze/slow").mkdir(parents=True)
    (root / "ratui.yaml").write_text(SETTINGS)
    (root / "demo/pipelines/bronze/slow/pipeline.sql").write_text(SLOW)
    (root / "demo/pipelines/bronze/quick/").mkdir(parents=True)
    (root / "demo/pipelines/bronze/quick/pipeline.sql").write_text("SELECT 1 AS id\n")
    (root / "demo/pipelines/bronze/quick/tests/quality").mkdir(parents=True)
    (root / "demo/pipelines/bronze/quick/tests/quality/t.sql").write_text("SELECT * FROM {{ this }} WHERE id < 0\n")
    return root


def stats(values: list[float]) -> str:
    median, low, high = statistics.median(values) * 1000, min(values) * 1000, max(values) * 1000
    return f"median {median:7.0f} ms  min {low:6.0f}  max {high:6.0f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from ratui.engine.events import PhaseStarted, RunFinished
    from ratui.engine.facade.engine import Engine

    base = Path(tempfile.mkdtemp(prefix="ratui-cancel-"))
    engine = Engine.open(project(base, "p"))
    engine.start_spark()
    from ratui.engine.spark import session as spark_mod

    spark = spark_mod.get_spark(engine.settings)

    # baseline: Spark alone
    baseline = []
    for _ in range(args.repeat):
        done = threading.Event()

        def job(done: threading.Event = done) -> None:
            spark.sparkContext.setJobGroup("bench", "bench", interruptOnCancel=True)
            try:
                spark.sql(SLOW).count()
            except Exception:
                pass
            done.set()

        threading.Thread(target=job).start()
        time.sleep(2)
        began = time.monotonic()
        spark.sparkContext.cancelJobGroup("bench")
        done.wait(60)
        baseline.append(time.monotonic() - began)

    def timed_cancel(key: str, trigger) -> float:
        finished = {}
        engine.subscribe(lambda e: finished.setdefault(e.run_id, time.monotonic())
                         if isinstance(e, RunFinished) else None)
        invocation = engine.start([key], trigger="cli", force=True)
        run_id = invocation.run_ids[0]
        began = trigger(run_id)
        invocation.wait(120)
        assert engine.get_run(run_id)["status"] == "cancelled"
        return finished[run_id] - began

    mid_job = []
    for _ in range(args.repeat):
        def trig(run_id: str) -> float:
            time.sleep(4)
            t = time.monotonic()
            engine.cancel(run_id)
            return t
        mid_job.append(timed_cancel("demo.bronze.slow", trig))

    boundary = []
    for _ in range(args.repeat):
        stamp = {}

        def on_quality(event, stamp: dict = stamp) -> None:
            if isinstance(event, PhaseStarted) and event.phase == "quality" and event.run_id not in stamp:
                stamp[event.run_id] = time.monotonic()
                engine.cancel(event.run_id)

        unsubscribe = engine.subscribe(on_quality)
        boundary.append(timed_cancel("demo.bronze.quick", lambda run_id, stamp=stamp: _wait_stamp(stamp, run_id)))
        unsubscribe()

    cross, cli_total = [], []
    for _ in range(args.repeat):
        key = "demo.bronze.slow"
        invocation = engine.start([key], trigger="cli", force=True)
        run_id = invocation.run_ids[0]
        time.sleep(4)
        began = time.monotonic()
        subprocess.run([sys.executable, "-m", "ratui", "cancel", run_id, "--wait", "0", "--project",
                        str(engine.root)], check=True, capture_output=True, cwd=REPO)
        invocation.wait(120)
        cli_total.append(time.monotonic() - began)
        run = engine.get_run(run_id)
        assert run["status"] == "cancelled"
        requested = next(engine.state.history.db.query("select requested_at from cancel_requests where run_id = ?",
                                                       [run_id]))["requested_at"]
        cross.append((_ts(run["finished_at"]) - _ts(requested)).total_seconds())

    print(f"baseline  Spark cancelJobGroup alone         : {stats(baseline)}")
    print(f"(a) ratui cancel mid Spark job, in-process   : {stats(mid_job)}   "
          f"ratio {statistics.median(mid_job) / statistics.median(baseline):.1f}x")
    print(f"(b) ratui cancel at a phase boundary         : {stats(boundary)}")
    print(f"(c) `ratui cancel` from another process      : {stats(cross)}   (request row written -> run ended)")
    print(f"    the same, with the CLI's own start-up     : {stats(cli_total)}")


def _ts(text: str):
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _wait_stamp(stamp: dict, run_id: str) -> float:
    deadline = time.monotonic() + 120
    while run_id not in stamp and time.monotonic() < deadline:
        time.sleep(0.01)
    return stamp[run_id]


if __name__ == "__main__":
    main()
