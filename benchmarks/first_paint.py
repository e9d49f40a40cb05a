"""Time from launch to first paint of the console, with 10,000 runs in the history against an empty one.

    python benchmarks/first_paint.py                  # 0 and 10,000 runs, 3 launches each
    python benchmarks/first_paint.py --runs 0,10000,100000 --repeat 5
    python benchmarks/first_paint.py --tmux           # also the installed `ratui` in a real terminal (tmux)

Each launch is a fresh Python process (imports included), on a fresh copy of the sample project whose history
was seeded directly in SQLite. Figures, from the process start:

    first paint     Textual drew the first frame (the Pipelines screen, tree not yet filled)
    pipelines       the tree is filled with every pipeline's last status, duration and sparkline (history read)
    runs page       after pressing 2: the first page of the run history is on screen (from the key press)
    after imports   pipelines minus the imports of textual and ratui.app (less sensitive to a busy machine)
    tmux            the real binary in tmux until the tree is on screen (polled every 20 ms)

Launches alternate between the history sizes (round robin), so a machine that gets busier or quieter during the
benchmark shifts every size alike.

It prints the medians and each one's ratio to the baseline (the first --runs value) measured in the same run.
It never asserts a timing: it is a measurement, run by hand.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # as early as possible: the child's launch

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"
sys.path.insert(0, str(REPO))  # tests/scale_project.py: the history seeding shared with benchmarks/scale.py
PIPELINES = [
    "ecommerce.bronze.raw_customers", "ecommerce.bronze.raw_events", "ecommerce.bronze.raw_orders",
    "ecommerce.bronze.raw_products", "ecommerce.silver.clean_customers", "ecommerce.silver.clean_orders",
    "ecommerce.silver.product_catalog", "ecommerce.gold.customer_lifetime_value", "ecommerce.gold.daily_revenue",
    "ecommerce.gold.product_funnel",
]


def make_project(parent: Path, runs: int) -> Path:
    """A fresh copy of the sample project with `runs` finished runs in its history."""
    from tests.scale_project import seed_runs

    root = parent / f"runs-{runs}"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    seed_runs(root, runs, pipelines=PIPELINES)
    # open the catalog once, so every launch finds the same, complete state database
    from ratui.engine.facade.engine import Engine

    Engine.open(root).close()
    return root


# ---------------------------------------------------------------------------------------------- child


def child(root: Path) -> None:
    """One launch: import, start the App headless, wait for the tree and for the first runs page."""
    import asyncio

    from ratui.app import RatuiApp

    imported = time.perf_counter()

    async def go() -> dict:
        app = RatuiApp(root, spark_state="idle")
        async with app.run_test(size=(160, 48)) as pilot:
            while "pipelines_ready" not in app.marks:
                await asyncio.sleep(0.002)
            pressed = time.perf_counter()
            await pilot.press("2")
            while "runs_ready" not in app.marks:
                await asyncio.sleep(0.002)
            marks = dict(app.marks)
        return {
            "imports": imported - T0,
            "first_paint": marks["first_paint"] - T0,
            "pipelines": marks["pipelines_ready"] - T0,
            "runs_page": marks["runs_ready"] - pressed,
        }

    print(json.dumps(asyncio.run(go())))


# -------------------------------------------------------------------------------------------- tmux


def tmux_launch(root: Path, binary: str) -> float | None:
    session = f"ratui-bench-{os.getpid()}-{time.monotonic_ns() % 100000}"
    began = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48",
                    f"{binary} tui --project {root}"], check=True)
    try:
        deadline = began + 60
        while time.perf_counter() < deadline:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                                    text=True).stdout
            if "raw_customers" in screen and "bronze (4)" in screen:  # the tree is on screen
                return time.perf_counter() - began
            time.sleep(0.02)
        return None
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


# ------------------------------------------------------------------------------------------- parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="0,10000", help="history sizes; the first is the baseline")
    parser.add_argument("--repeat", type=int, default=3, help="launches per size (the median is reported)")
    parser.add_argument("--tmux", action="store_true", help="also time the installed ratui in tmux")
    parser.add_argument("--child", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child))
        return

    sizes = [int(s) for s in args.runs.split(",")]
    binary = shutil.which("ratui") or str(Path(sys.executable).parent / "ratui")
    use_tmux = args.tmux and shutil.which("tmux") and Path(binary).exists()
    results: dict[int, dict[str, list[float]]] = {size: {} for size in sizes}
    with tempfile.TemporaryDirectory(prefix="ratui-first-paint-") as tmp:
        roots = {}
        for size in sizes:
            began = time.perf_counter()
            roots[size] = make_project(Path(tmp), size)
            print(f"seeded {size:,} runs in {time.perf_counter() - began:.1f}s", file=sys.stderr)
        for round_ in range(args.repeat):
            for size in sizes:
                figures = results[size]
                out = subprocess.run([sys.executable, __file__, "--child", str(roots[size])], capture_output=True,
                                     text=True, cwd=REPO)
                if out.returncode != 0:
                    sys.exit(f"launch failed:\n{out.stderr[-3000:]}")
                measured = json.loads(out.stdout.strip().splitlines()[-1])
                measured["after_imports"] = measured["pipelines"] - measured["imports"]
                for key, value in measured.items():
                    figures.setdefault(key, []).append(value)
                if use_tmux:
                    value = tmux_launch(roots[size], binary)
                    if value is not None:
                        figures.setdefault("tmux", []).append(value)
            print(f"round {round_ + 1}/{args.repeat} done", file=sys.stderr)

    keys = ["imports", "first_paint", "pipelines", "after_imports", "runs_page"] + (["tmux"] if use_tmux else [])
    base = sizes[0]
    print(f"\nratui console, launch to first paint (median of {args.repeat}; ratio to {base:,} runs)")
    print(f"{'runs':>9}  " + "  ".join(f"{k:>18}" for k in keys))
    for size in sizes:
        cells = []
        for key in keys:
            values = results[size].get(key)
            if not values:
                cells.append(f"{'-':>18}")
                continue
            median = statistics.median(values)
            ratio = median / statistics.median(results[base][key]) if results[base].get(key) else float("nan")
            cells.append(f"{median * 1000:>9.0f} ms x{ratio:>5.2f}")
        print(f"{size:>9,}  " + "  ".join(cells))
    print("\nfirst_paint and pipelines are from the process start; runs_page from pressing 2.")


if __name__ == "__main__":
    main()
