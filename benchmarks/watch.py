"""Watch mode (a): the time from a file save to the affected run starting, on a copy of the sample project.

    python benchmarks/watch.py [--saves 8] [--debounce-ms 300] [--pipeline gold.daily_revenue]

A warm engine (Spark up, the whole project run once) watches a fresh copy of sample_project/. Each save
appends a comment to one pipeline file; the latency is measured from the moment the write returned to the
engine's RunStarted event for that pipeline (subscribed with engine.subscribe), split into
    detect+debounce+plan   save -> WatchPlanStarted (watchfiles' 50 ms step, the quiet period, compile, plan)
    engine start           WatchPlanStarted -> RunStarted (the engine's compile, run record, queue)
The debounce is the floor: the ratio median/debounce says how much the rest costs. Asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"


def fresh_copy(base: Path, name: str) -> Path:
    # the copy rule of tests/conftest.py `sample_copy`: no state a local run left in the checkout
    dest = base / name
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def stats(label: str, values_ms: list[float], debounce_ms: int | None = None) -> str:
    med = statistics.median(values_ms)
    line = f"{label:<28} median {med:7.1f} ms   min {min(values_ms):7.1f}   max {max(values_ms):7.1f}"
    if debounce_ms:
        line += f"   median/debounce = {med / debounce_ms:.2f}x"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=8)
    parser.add_argument("--debounce-ms", type=int, default=None, help="default: ratui.yaml (300 ms)")
    parser.add_argument("--pipeline", default="gold.daily_revenue", help="the pipeline whose file is saved")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    from ratui.engine.events import RunStarted
    from ratui.engine.facade.engine import Engine
    from ratui.engine.events import WatchPlanFinished, WatchPlanStarted
    from ratui.engine.watch.watcher import Watcher

    base = Path(tempfile.mkdtemp(prefix="ratui-bench-watch-"))
    try:
        root = fresh_copy(base, "sample").resolve()
        engine = Engine.open(root)
        began = time.monotonic()
        engine.start_spark()
        compiled = engine.compile()
        results = engine.run(compiled.select([]))
        setup = time.monotonic() - began
        failed = [r.pipeline for r in results if r.status != "success"]
        if failed:
            raise SystemExit(f"the first run of the sample project failed: {failed}")
        target = compiled.resolve(args.pipeline)

        lock = threading.Lock()
        marks: dict[str, float] = {}
        plan_started = threading.Event()
        run_started = threading.Event()
        plan_done = threading.Event()

        def on_engine(event) -> None:
            if isinstance(event, RunStarted) and event.pipeline == target.key and not run_started.is_set():
                with lock:
                    marks["run"] = time.monotonic()
                run_started.set()

        def on_watch(event) -> None:
            if isinstance(event, WatchPlanStarted):
                with lock:
                    marks["plan"] = time.monotonic()
                    marks["plan_keys"] = len(event.keys)
                plan_started.set()
            elif isinstance(event, WatchPlanFinished):
                plan_done.set()

        engine.subscribe(on_engine)
        watcher = Watcher(engine=engine, debounce_ms=args.debounce_ms, on_event=on_watch).start()
        total, detect, start = [], [], []
        try:
            time.sleep(0.5)
            text = target.file.read_text()
            for i in range(args.saves):
                plan_started.clear(), run_started.clear(), plan_done.clear()
                target.file.write_text(text + f"\n-- benchmark save {i}\n")
                saved = time.monotonic()
                if not run_started.wait(120):
                    raise SystemExit(f"save {i}: no run started within 120 s")
                with lock:
                    total.append((marks["run"] - saved) * 1000)
                    detect.append((marks["plan"] - saved) * 1000)
                    start.append((marks["run"] - marks["plan"]) * 1000)
                if not plan_done.wait(600):
                    raise SystemExit(f"save {i}: the run did not finish within 600 s")
                time.sleep(0.3)
            debounce = watcher.debounce_ms
        finally:
            watcher.stop()
            engine.close()

        print(f"sample project, warm engine (setup: Spark start + first full run {setup:.1f} s)")
        print(f"saving {target.key}'s {target.file.name} {args.saves} times; debounce {debounce} ms "
              f"(the floor), watchfiles step {watcher.step_ms} ms")
        print(stats("save -> run started", total, debounce))
        print(stats("  detect+debounce+plan", detect, debounce))
        print(stats("  engine start", start))
        print(f"  (each plan held {marks.get('plan_keys')} pipeline(s))")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
