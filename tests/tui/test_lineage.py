"""Lineage: the DAG's layout (pure: columns, order, rows, routing, drawing) and the screen (keys, highlight, the
jumps to and from Pipelines, live colours), with snapshots at 80x24 and 120x40. No Spark: seeded history."""

from __future__ import annotations

import random
from collections import deque

import pytest

from ratui.console.controller import Controller
from ratui.console.lineage.drawing import ARROW, CROSSING, Drawing, draw
from ratui.console.lineage.layout import Layout, layout, place
from ratui.console.lineage.navigation import lineage, move
from ratui.engine.errors import RatuiError
from ratui.engine.events import RunFinished, RunQueued, RunStarted
from ratui.engine.project.compiler import compile_project
from ratui.engine.state.history import History
from ratui.screens.lineage import LineageScreen
from ratui.screens.pipelines import PipelinesScreen
from ratui.widgets.lineage_graph import LineageGraph

from .conftest import copy_sample, make_app, run, screen_text, settle, wait_for
from .seed import seed_history

NS = "ecommerce"
BRONZE = [f"{NS}.bronze.{n}" for n in ("raw_customers", "raw_events", "raw_orders", "raw_products")]
SILVER = [f"{NS}.silver.{n}" for n in ("clean_customers", "clean_orders", "product_catalog")]
GOLD = [f"{NS}.gold.{n}" for n in ("customer_lifetime_value", "daily_revenue", "product_funnel")]
SMALL = (80, 24)
LARGE = (120, 40)


@pytest.fixture(scope="module")
def compiled(seeded):
    return compile_project(seeded)


def labels_for(nodes) -> dict[str, str]:
    return {n: f"● {n}" for n in nodes}


def lay_out(upstream: dict[str, list[str]], extra: tuple[str, ...] = ()) -> tuple[Layout, Drawing]:
    nodes = sorted(set(upstream) | {p for ps in upstream.values() for p in ps} | set(extra))
    lay = layout(nodes, upstream)
    return lay, draw(lay, labels_for(nodes))


def cells(drawing: Drawing) -> dict[tuple[int, int], tuple[str, object]]:
    out = {}
    for y, runs in enumerate(drawing.lines):
        x = 0
        for text, owner in runs:
            for char in text:
                out[(x, y)] = (char, owner)
                x += 1
    return out


def check_drawing(lay: Layout, drawing: Drawing, labels: dict[str, str]) -> None:
    """What a reader relies on: every label whole and apart from the others, edges left to right, and each drawn
    edge one unbroken line from its parent's box to an arrow at its child (crossing lines may pass over it)."""
    grid = cells(drawing)
    boxes = drawing.boxes
    assert set(boxes) == set(lay.nodes)
    for key, (x, y, width) in boxes.items():
        assert "".join(grid[(x + i, y)][0] for i in range(width)) == f" {labels[key]} "
        assert all(grid[(x + i, y)][1] == key for i in range(width))
    for a in boxes:  # no two boxes overlap
        for b in boxes:
            (xa, ya, wa), (xb, yb, wb) = boxes[a], boxes[b]
            if a < b and ya == yb:
                assert xa + wa <= xb or xb + wb <= xa, (a, b)
    for parent, child in lay.drawn:
        assert lay.column[parent] < lay.column[child]
        px, py, pw = boxes[parent]
        cx, cy, _ = boxes[child]
        mine = {xy for xy, (_, owner) in grid.items() if isinstance(owner, frozenset) and (parent, child) in owner}
        start, end = (px + pw, py), (cx - 1, cy)
        assert start in mine and end in mine and grid[end][0] == ARROW, (parent, child)
        # walk the edge's cells from the parent's box; a crossing (the other line on top) may be stepped over
        seen, todo = {start}, deque([start])
        while todo:
            x, y = todo.popleft()
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                step = (x + dx, y + dy)
                if step not in mine and dy == 0 and grid.get(step, (" ",))[0] == CROSSING:
                    step = (x + 2 * dx, y)
                if step in mine and step not in seen:
                    seen.add(step)
                    todo.append(step)
        assert end in seen, f"{parent} -> {child} is broken:\n{drawing.text()}"


# ---------------------------------------------------------------------------------------------- pure layout


def test_the_sample_projects_layers_follow_its_dependencies(compiled):
    graph = compiled.graph
    lay = layout(graph.nodes, graph.upstream)
    # bronze reads only landing files, silver reads bronze, gold reads silver (and product_funnel raw events too)
    assert {lay.column[k] for k in BRONZE} == {0}
    assert {lay.column[k] for k in SILVER} == {1}
    assert {lay.column[k] for k in GOLD} == {2}
    for key in graph.nodes:  # each column is 1 + the longest path from a root
        parents = graph.upstream[key]
        assert lay.column[key] == (1 + max(lay.column[p] for p in parents) if parents else 0)
    assert sorted(lay.drawn) == sorted((p, c) for c in graph.nodes for p in set(graph.upstream[c]))
    assert lay.back_edges == []
    # raw_events -> product_funnel skips silver: drawn through a waypoint in the silver column
    assert len(lay.chain[(f"{NS}.bronze.raw_events", f"{NS}.gold.product_funnel")]) == 3
    labels = labels_for(graph.nodes)
    check_drawing(lay, draw(lay, labels), labels)


def test_a_diamond_lays_out_without_overlaps_and_every_edge_drawn():
    lay, drawing = lay_out({"b": ["a"], "c": ["a"], "d": ["b", "c"]})
    assert [lay.column[n] for n in "abcd"] == [0, 1, 1, 2]
    assert lay.row["b"] != lay.row["c"]
    check_drawing(lay, drawing, labels_for("abcd"))


def test_a_wide_fan_in_and_fan_out_keep_nodes_apart_and_the_target_between_its_sources():
    sources = [f"s{i}" for i in range(9)]
    lay, drawing = lay_out({"t": sources, **{f"out{i}": ["t"] for i in range(6)}})
    rows = sorted(lay.row[s] for s in sources)
    assert all(b - a >= 2 for a, b in zip(rows, rows[1:]))  # a blank line between two pipelines
    assert rows[0] < lay.row["t"] < rows[-1]
    check_drawing(lay, drawing, labels_for(lay.nodes))
    # the fan-in is one vertical line that each source joins: one joint per source, one per target
    assert sum(drawing.text().count(j) for j in "┬┴┼├┤┐┘┌└") >= 9 + 6


def test_one_pipeline_and_pipelines_without_edges():
    lay, drawing = lay_out({"only": []})
    assert lay.columns == [["only"]] and drawing.text() == " ● only"
    lay, drawing = lay_out({}, extra=("a", "b", "c"))
    assert [lay.column[n] for n in "abc"] == [0, 0, 0]
    assert len({lay.row[n] for n in "abc"}) == 3
    assert not any(ch in drawing.text() for ch in "─│▶")  # nothing but the labels
    check_drawing(lay, drawing, labels_for("abc"))
    lay, drawing = lay_out({})
    assert lay.columns == [] and drawing.lines == []


def test_a_cycle_is_cut_at_one_edge_and_the_rest_still_lays_out():
    lay, drawing = lay_out({"a": ["c"], "b": ["a"], "c": ["b"], "d": ["c"]})
    assert len(lay.back_edges) == 1 and lay.back_edges[0] in {("c", "a"), ("a", "b"), ("b", "c")}
    assert set(lay.column) >= {"a", "b", "c", "d"}
    check_drawing(lay, drawing, labels_for("abcd"))
    ancestors, _, _ = lineage(lay, "d")
    assert ancestors == {"a", "b", "c"}  # the lineage still follows the cut edge


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_draw_readably(seed):
    rng = random.Random(seed)
    nodes = [f"n{i:02d}" for i in range(rng.randint(2, 30))]
    upstream = {n: rng.sample(nodes[:i], min(rng.choice([0, 1, 1, 2, 3]), i)) for i, n in enumerate(nodes)}
    lay, drawing = lay_out(upstream)
    for column in lay.columns:
        rows = sorted(lay.row[n] for n in column)
        assert all(b - a >= 2 for a, b in zip(rows, rows[1:]))
    check_drawing(lay, drawing, labels_for(nodes))


def test_rows_are_placed_in_order_apart_and_as_near_as_possible():
    assert place([4, 4, 4]) == [2, 4, 6]  # three wanting one row share it around that row
    assert place([0, 10, 11]) == [0, 10, 12]
    assert place([5, 1]) == [2, 4]  # order kept


def test_lineage_lights_the_paths_through_the_selection(compiled):
    graph = compiled.graph
    lay = layout(graph.nodes, graph.upstream)
    key = f"{NS}.silver.clean_orders"
    ancestors, descendants, edges = lineage(lay, key)
    assert ancestors == graph.ancestors(key) and descendants == graph.descendants(key)
    assert edges == {(f"{NS}.bronze.raw_orders", key)} | {(key, g) for g in GOLD} | {
        (f"{NS}.gold.customer_lifetime_value", f"{NS}.gold.country_summary")}  # the Python pipeline downstream
    # product_catalog -> daily_revenue joins two lit nodes' neighbours, but not through clean_orders: not lit
    assert (f"{NS}.silver.product_catalog", f"{NS}.gold.daily_revenue") not in edges


def test_moving_follows_connections(compiled):
    graph = compiled.graph
    lay = layout(graph.nodes, graph.upstream)
    assert move(lay, f"{NS}.silver.clean_customers", "right") == f"{NS}.gold.customer_lifetime_value"
    assert move(lay, f"{NS}.silver.clean_orders", "left") == f"{NS}.bronze.raw_orders"
    assert move(lay, f"{NS}.bronze.raw_events", "downstream") == f"{NS}.gold.product_funnel"  # two layers on
    assert move(lay, f"{NS}.bronze.raw_events", "right") in SILVER  # nothing connected there: the nearest
    assert move(lay, f"{NS}.bronze.raw_customers", "upstream") is None
    assert move(lay, f"{NS}.bronze.raw_customers", "left") is None
    for key in graph.nodes:
        column = lay.in_column(lay.column[key])
        below = move(lay, key, "down")
        if below is None:
            assert column[-1] == key
        else:  # the next one down in the same layer
            assert lay.column[below] == lay.column[key]
            assert lay.row[below] == min(lay.row[n] for n in column if lay.row[n] > lay.row[key])


# ---------------------------------------------------------------------------------------------- the screen


async def open_lineage(pilot) -> LineageScreen:
    await settle(pilot)
    await pilot.press("8")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, LineageScreen)
    return screen


def test_keys_move_the_selection_and_light_its_lineage(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            screen = await open_lineage(pilot)
            graph = app.compiled.graph
            assert screen.selected == BRONZE[0]  # the top left
            text = screen_text(app)
            assert "✔ bronze.raw_customers" in text and "✘ silver.clean_orders" in text
            assert "■ silver.clean_customers" in text and "· gold.product_funnel" in text
            assert "full_refresh" in text and "↓ 3 downstream" in text  # clean_customers, its gold, country_summary

            await pilot.press("right")  # raw_customers' one child
            assert screen.selected == f"{NS}.silver.clean_customers"
            await pilot.press("right")
            assert screen.selected == f"{NS}.gold.customer_lifetime_value"
            await pilot.press("u")  # to a direct parent
            assert screen.selected in graph.upstream[f"{NS}.gold.customer_lifetime_value"]
            screen.select_key(f"{NS}.silver.clean_orders")
            await pilot.press("left")
            assert screen.selected == f"{NS}.bronze.raw_orders"
            await pilot.press("u")  # a root: stays, and says so
            await settle(pilot)
            assert screen.selected == f"{NS}.bronze.raw_orders"
            assert any("nothing upstream" in n for n in app.notices)

            for key in graph.nodes:
                screen.select_key(key)
                await pilot.pause()
                lit = screen.graph.lit
                assert lit == graph.ancestors(key) | graph.descendants(key), key
            screen.select_key(f"{NS}.silver.clean_orders")
            await settle(pilot)
            text = screen_text(app)
            assert "ecommerce.silver.clean_orders" in text and "incremental" in text
            assert "↑ 1 upstream · ↓ 4 downstream" in text  # three gold, and country_summary after one
            assert "✘ failed 2026-03-01 11:00:00 (1h ago)" in text
            assert not app.crashes

    run(go())


def test_enter_opens_pipelines_on_it_and_g_comes_back(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            screen = await open_lineage(pilot)
            screen.select_key(f"{NS}.gold.daily_revenue")
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, PipelinesScreen)
            assert app.screen.selected == ("pipeline", f"{NS}.gold.daily_revenue")
            await pilot.press("up")  # the tree lists a layer's pipelines by name
            await settle(pilot)
            assert app.screen.selected == ("pipeline", f"{NS}.gold.customer_lifetime_value")
            await pilot.press("g")
            await settle(pilot)
            assert isinstance(app.screen, LineageScreen)
            assert app.screen.selected == f"{NS}.gold.customer_lifetime_value"

    run(go())


def test_at_80x24_the_selection_scrolls_into_view_and_r_runs_it(seeded):
    app = make_app(seeded)
    runs: list[str] = []
    app.run_pipeline = lambda key, **_: runs.append(key)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.show_pipeline(f"{NS}.gold.customer_lifetime_value", "lineage")
            await settle(pilot)
            screen = app.screen
            graph = screen.query_one(LineageGraph)
            assert screen.selected == f"{NS}.gold.customer_lifetime_value"
            assert graph.virtual_size.width > graph.size.width  # wider than the terminal: it scrolls
            x, y, width = graph.drawing.boxes[screen.selected]
            assert graph.scroll_x <= x and x + width <= graph.scroll_x + graph.scrollable_content_region.width
            assert "gold.customer_lifetime_value" in screen_text(app)
            footer = screen_text(app).splitlines()[-1]
            for key in ("⏎ Pipelines", "r Run", "u Upstream", "d Downstream", "w Watch", ": Jump", "? Help"):
                assert key in footer
            await pilot.press("r")
            assert runs == [f"{NS}.gold.customer_lifetime_value"]
            await pilot.press("left", "left")  # back to the first layer: scrolled back
            await settle(pilot)
            assert graph.scroll_x == 0 and screen.selected in BRONZE

    run(go())


def test_a_click_selects_a_pipeline(seeded):
    app = make_app(seeded)

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            screen = await open_lineage(pilot)
            graph = screen.graph
            x, y, _ = graph.drawing.boxes[f"{NS}.silver.product_catalog"]
            region = graph.content_region
            await pilot.click(offset=(region.x + x + 3, region.y + y))
            await settle(pilot)
            assert screen.selected == f"{NS}.silver.product_catalog"

    run(go())


def test_a_live_run_colours_its_node_and_its_end_reloads_the_last_status(tmp_path):
    root = copy_sample(tmp_path)
    seed_history(root)
    app = make_app(root)
    rid = "260301120000f00d09"
    key = f"{NS}.gold.product_funnel"

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            screen = await open_lineage(pilot)
            assert "· gold.product_funnel" in screen_text(app)
            bus = app.controller.engine._bus
            for event in (RunQueued(rid, key, "console"), RunStarted(rid, key, f"run-{rid}")):
                bus.emit(event)
            await wait_for(pilot, lambda: "● gold.product_funnel" in screen_text(app), 10)
            screen.select_key(key)
            await settle(pilot)
            assert "● running" in screen_text(app)
            # the engine records the run, then says it ended: the node shows the recorded outcome
            History(root / ".ratui" / "ratui.db").db["runs"].insert({
                "id": rid, "pipeline": key, "status": "cancelled", "trigger": "console", "strategy": "full_refresh",
                "queued_at": "2026-03-01T11:59:00.000Z", "started_at": "2026-03-01T11:59:00.000Z",
                "finished_at": "2026-03-01T11:59:01.000Z", "duration_ms": 1000, "rows_written": 0, "warnings": 0,
                "branch": f"run-{rid}"})
            bus.emit(RunFinished(rid, key, "cancelled", 0, 1000))
            await wait_for(pilot, lambda: "■ gold.product_funnel" in screen_text(app), 10)

    run(go())


class NoHistory(Controller):
    def recent(self, per_pipeline: int = 12):
        raise RatuiError("RAT-RUN-002", "the run history could not be read")


def test_without_the_history_the_graph_still_draws_and_a_toast_says_why(seeded):
    app = make_app(seeded, controller=NoHistory(seeded))

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            await settle(pilot)
            said = [n for n in app.notices if "the run history could not be read" in n]  # Pipelines' own
            await pilot.press("8")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, LineageScreen) and not screen.graph.loading
            assert "· bronze.raw_customers" in screen_text(app)  # no colours, but the graph
            assert len([n for n in app.notices if "the run history could not be read" in n]) == len(said) + 1
            await pilot.press("right")
            assert screen.selected == f"{NS}.silver.clean_customers"

    run(go())


def test_a_broken_project_still_draws(broken):
    app = make_app(broken)

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            screen = await open_lineage(pilot)
            # the cycle clean_customers <-> customer_lifetime_value: both marked broken, one edge not drawn
            cycle = {f"{NS}.silver.clean_customers", f"{NS}.gold.customer_lifetime_value"}
            assert "✘ gold.customer_lifetime_value" in screen_text(app)
            assert all(screen.graph.labels[k].startswith("✘ ") for k in cycle)
            assert [set(e) for e in screen.graph_layout.back_edges] == [cycle]
            screen.select_key(f"{NS}.silver.clean_customers")
            await settle(pilot)
            assert "RAT-DAG-001" in screen_text(app)
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------------------- snapshots


def snap(snap_compare, app, *steps, size):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("8")
        await settle(pilot)
        for step in steps:
            if callable(step):
                step(pilot.app)
            else:
                await pilot.press(*step)
            await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshot_lineage(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), size=LARGE)


def test_snapshot_lineage_selected_in_the_middle(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), lambda app: app.screen.select_key(f"{NS}.silver.clean_orders"),
                size=LARGE)


def test_snapshot_lineage_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), size=SMALL)


def test_snapshot_lineage_80x24_scrolled_to_gold(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), ("down", "down", "right", "right"), size=SMALL)
