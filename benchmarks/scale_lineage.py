"""Lineage at scale (benchmarks/scale.py --only lineage): the time to a laid-out, drawn view of the Lineage screen.

    python benchmarks/scale.py --only lineage --sizes 150,1500,15000

Figures per project size (pipelines, the generated shapes of tests/scale_project.py), goal 0.3 s each:

    lineage focused view d1 80x24     console/lineage/view.py `view` (neighbourhood, layout, drawing) of a focused
    lineage focused view d2 160x48    view, the worst of a bronze (fan-out), a silver and a gold (fan-in) of the
                                      project, median of --repeat
    lineage fan-in 300 d2 160x48      a gold reading 300 silvers (each with its bronze): grouped to a screenful
    lineage whole view 160x48         the whole graph, only where it fits a 160x48 view (else a note says so)
    lineage screen open 160x48        headless App (run_test): from show_pipeline(key, "lineage") to the screen's
                                      lineage_ready mark (laid out in its worker, drawn, coloured) and a paint
    lineage screen refocus 160x48     the same screen focusing on another pipeline (the find dialog's enter)

The layout figures use the project's graph built from the generator's plan (what compile_project builds from the
files); the screen figures compile the generated project once (compiling is measured by scale_compile.py, not here).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from functools import partial
from pathlib import Path

from benchmarks.scale import Figure

GOAL = 0.3


def graph_of(size: int):
    from ratui.engine.project.dag import Graph
    from tests.scale_project import plan

    spaces = plan(size)
    upstream = {f"{ns}.{layer}.{name}": list(ups) for ns, items in spaces.items() for layer, name, ups, _ in items}
    keys = sorted(upstream)
    downstream: dict[str, list[str]] = {k: [] for k in keys}
    for child, parents in upstream.items():
        for parent in parents:
            downstream[parent].append(child)
    return Graph(keys, upstream, downstream)


def samples(graph) -> list[str]:
    bronze = next(k for k in graph.nodes if ".bronze." in k)
    silver = [k for k in graph.nodes if ".silver." in k][len(graph.nodes) // 10]
    gold = max((k for k in graph.nodes if ".gold." in k), key=lambda k: len(graph.upstream[k]))
    return [bronze, silver, gold]


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fan_in_graph(size: int = 300):
    from ratui.engine.project.dag import Graph

    upstream = {"p.gold.wide": [f"p.silver.s{i:04d}" for i in range(size)]}
    for i in range(size):
        upstream[f"p.silver.s{i:04d}"] = [f"p.bronze.b{i % 40:04d}"]
    for i in range(40):
        upstream[f"p.bronze.b{i:04d}"] = []
    downstream: dict[str, list[str]] = {k: [] for k in upstream}
    for child, parents in upstream.items():
        for parent in parents:
            downstream[parent].append(child)
    return Graph(sorted(upstream), upstream, downstream)


def layout_figures(args) -> list[Figure]:
    from ratui.console.lineage.view import view, whole_fits

    out: list[Figure] = []
    for size in args.sizes:
        graph = graph_of(size)
        keys = samples(graph)
        for depth, (width, height), label in ((1, (79, 16), "d1 80x24"), (2, (159, 40), "d2 160x48")):
            worst, note = 0.0, ""
            for key in keys:
                seconds = timed(partial(view, graph, key=key, depth=depth, width=width, height=height), args.repeat)
                if seconds >= worst:
                    shown = view(graph, key=key, depth=depth, width=width, height=height)
                    worst, note = seconds, f"worst: {key.split('.', 1)[1]} ({len(shown.layout.nodes)} nodes)"
            out.append(Figure(f"lineage focused view {label}", size, "pipelines", worst, GOAL, note))
        if whole_fits(graph, 159, 40):
            seconds = timed(partial(view, graph, key=None, depth=1, width=159, height=40), args.repeat)
            out.append(Figure("lineage whole view 160x48", size, "pipelines", seconds, GOAL))
        else:
            start = time.perf_counter()
            whole_fits(graph, 159, 40)
            out.append(Figure("lineage whole view 160x48", size, "pipelines", time.perf_counter() - start, GOAL,
                              "does not fit: the screen shows it focused (time to decide)"))
    wide = fan_in_graph()
    seconds = timed(partial(view, wide, key="p.gold.wide", depth=2, width=159, height=40), args.repeat)
    out.append(Figure("lineage fan-in 300 d2 160x48", 300, "parents", seconds, GOAL))
    return out


async def open_and_refocus(app, first: str, then: str) -> dict[str, float]:
    """Seconds from show_pipeline(first, "lineage") to the screen ready and painted, then to `then` focused."""
    from ratui.screens.lineage import LineageScreen

    figures: dict[str, float] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        while app.compiled is None:
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        start = time.perf_counter()
        app.show_pipeline(first, "lineage")
        while "lineage_ready" not in app.marks:
            await pilot.pause(0.005)
        await pilot.pause()
        figures["open"] = time.perf_counter() - start
        screen = app.screen
        assert isinstance(screen, LineageScreen)
        start = time.perf_counter()
        screen.select_key(then)
        while screen.view is None or screen.view.focus is None or screen.view.focus.key != then \
                or screen.selected != then:
            await pilot.pause(0.005)
        await pilot.pause()
        figures["refocus"] = time.perf_counter() - start
    return figures


def screen_figures(args, workdir: Path) -> list[Figure]:
    from ratui.app import RatuiApp
    from ratui.console.controller import Controller
    from ratui.engine.project.compiler import compile_project
    from tests.scale_project import generate_project

    class CompiledOnce(Controller):
        def __init__(self, root, compiled) -> None:
            super().__init__(root)
            self._once = compiled

        def compile(self):
            return self._once

    out: list[Figure] = []
    for size in args.sizes:
        root = workdir / f"project-{size}"
        if not (root / "ratui.yaml").exists():
            generate_project(root, size)
        started = time.perf_counter()
        compiled = compile_project(root)
        compile_seconds = time.perf_counter() - started
        keys = samples(compiled.graph)
        app = RatuiApp(root, controller=CompiledOnce(root, compiled), spark_state="idle", blink=False,
                       reaper_schedule=False)
        seen = asyncio.run(open_and_refocus(app, keys[0], keys[2]))
        note = f"compile {compile_seconds:.1f} s not included"
        out.append(Figure("lineage screen open 160x48", size, "pipelines", seen["open"], GOAL, note))
        out.append(Figure("lineage screen refocus 160x48", size, "pipelines", seen["refocus"], GOAL))
    return out


def figures(args, workdir: Path) -> list[Figure]:
    workdir.mkdir(parents=True, exist_ok=True)
    return layout_figures(args) + screen_figures(args, workdir)
