"""Scale: what ratui costs on projects of 150, 1,500 and 15,000 pipelines, histories of up to 1M runs, landing
zones of up to 100k files and tables of 10M (and, by hand, 100M) rows.

    python benchmarks/scale.py                       # every area at its default sizes (a few minutes)
    python benchmarks/scale.py --only compile        # one area: compile, console, lineage, landing, tables
    python benchmarks/scale.py --sizes 150,1500      # skip the 15,000-pipeline project
    python benchmarks/scale.py --only tables --rows 100000000 --small 10000000   # the 100M-row case, by hand

Projects, histories and zones are generated (tests/scale_project.py: realistic shapes, deterministic). Each
area lives in its own module (benchmarks/scale_<area>.py) with a `figures(args, workdir)` function returning
Figure rows; this script prints them all as one table: each figure at each size beside its goal, and the growth
factor per 10x of size (the cost should grow no faster than the work: about 10x per 10x, less is better).
It never asserts a timing: it is a measurement, run by hand (`uptime` first; the load is printed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

AREAS = ("compile", "console", "lineage", "landing", "tables")


@dataclass
class Figure:
    what: str  # the measured thing, e.g. "ratui check"
    size: int  # its size (pipelines, runs, files or rows: `unit` says which)
    unit: str
    seconds: float
    goal: float | None = None  # seconds at this size, when the issue sets one
    note: str = ""  # what else a reader needs (a reference measured in the same run, a peak RSS, ...)

    @property
    def verdict(self) -> str:
        if self.goal is None:
            return "-"
        return "met" if self.seconds <= self.goal else "NOT met"


def growth(rows: list[Figure]) -> dict[int, str]:
    """size -> growth of the cost per 10x of size against the previous size of the same figure."""
    out: dict[int, str] = {}
    previous: Figure | None = None
    for row in sorted(rows, key=lambda r: r.size):
        if previous is not None and previous.seconds > 0 and row.size > previous.size:
            import math

            decades = math.log10(row.size / previous.size)
            factor = (row.seconds / previous.seconds) ** (1 / decades) if decades else 0
            out[row.size] = f"{factor:.1f}x per 10x"
        previous = row
    return out


def print_table(figures: list[Figure]) -> None:
    print("| what | size | seconds | goal | growth | note |")
    print("|---|---|---|---|---|---|")
    by_what: dict[str, list[Figure]] = {}
    for figure in figures:
        by_what.setdefault(figure.what, []).append(figure)
    for what, rows in by_what.items():
        grown = growth(rows)
        for row in sorted(rows, key=lambda r: r.size):
            goal = f"<= {row.goal:g} s ({row.verdict})" if row.goal is not None else "-"
            print(f"| {what} | {row.size:,} {row.unit} | {row.seconds:.3f} | {goal} | {grown.get(row.size, '-')} "
                  f"| {row.note} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=AREAS, action="append", help="one area (repeatable)")
    parser.add_argument("--sizes", default="150,1500,15000", help="project sizes in pipelines")
    parser.add_argument("--runs", default="10000,100000,1000000", help="history sizes in runs")
    parser.add_argument("--files", default="1000,10000,100000", help="landing zone sizes in files")
    parser.add_argument("--rows", type=int, default=10_000_000, help="the large table's rows")
    parser.add_argument("--small", type=int, default=1_000_000, help="the smaller table's rows (growth reference)")
    parser.add_argument("--repeat", type=int, default=3, help="median of this many measurements where cheap")
    parser.add_argument("--noop", default="150", help="project sizes for the no-op run (each needs a first run on "
                        "Spark: about 11 minutes at 1,500; reused with --workdir)")
    parser.add_argument("--workdir", help="keep generated projects here (default: a temporary folder)")
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.runs = [int(s) for s in args.runs.split(",") if s]
    args.files = [int(s) for s in args.files.split(",") if s]
    args.noop = [int(s) for s in args.noop.split(",") if s]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus {os.cpu_count()}")
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="ratui-scale-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for area in args.only or AREAS:
            try:
                module = importlib.import_module(f"benchmarks.scale_{area}")
            except ModuleNotFoundError:
                print(f"({area}: benchmarks/scale_{area}.py is not there)")
                continue
            found = module.figures(args, workdir / area)
            figures.extend(found)
            print(f"[{area}] {len(found)} figures; load average now {os.getloadavg()[0]:.2f}", flush=True)
    print()
    print_table(figures)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
