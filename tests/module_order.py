"""The order test modules start in: the longest first.

Under `pytest -n 2 --dist loadfile` each worker takes the next module when it is nearly done with its last one. A long
module started last leaves the other worker idle until it ends (pytest-xdist's own order is by the number of tests in
a module, which says little here: a module of five tests against a Spark cluster outlasts one of a hundred
compile checks). Started longest first, the short ones fill in at the end.

The times are those of a recorded full run (`pytest -n 2 --dist loadfile --record-module-times` rewrites
tests/module_times.json): seconds per module, summed over its tests' setup, call and teardown. A module not in the
file (new since) starts first: unknown is treated as long, so a new slow module cannot become the tail.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

TIMES = Path(__file__).with_name("module_times.json")


def recorded() -> dict[str, float]:
    try:
        times = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in times.items()} if isinstance(times, dict) else {}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(items: list, times: dict[str, float]) -> None:
    """Sort `items` (pytest items) in place by their module's recorded time, longest first; a stable sort, so each
    module's tests keep their order, and modules without a time go first in their collected order."""
    if times:
        items.sort(key=lambda item: -times.get(module_of(item.nodeid), float("inf")))


class Recorder:
    """Sums each module's test durations as reports arrive (on the controller, from every worker)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def add(self, nodeid: str, duration: float) -> None:
        self.seconds[module_of(nodeid)] += duration

    def write(self) -> None:
        ordered = dict(sorted(((m, round(s, 1)) for m, s in self.seconds.items()), key=lambda kv: (-kv[1], kv[0])))
        TIMES.write_text(json.dumps(ordered, indent=1) + "\n")
