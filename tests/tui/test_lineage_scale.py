"""Lineage at scale (issue 34): on a generated project of 1,500 pipelines the screen shows one pipeline focused,
with its upstream and downstream to a depth; what is laid out is that neighbourhood, never the project. Also what a
user can get wrong: a name that does not exist, a cycle, a pipeline with no edges, a depth beyond the graph, a gold
reading 300 silvers. Snapshots at 80x24 and 160x48. No Spark: the history is seeded."""

from __future__ import annotations

from collections import deque

import pytest
from textual.widgets import Input, OptionList

from ratui.console.controller import Controller
from ratui.console.find_pipeline import find
from ratui.console.lineage.focus import BUDGET, fan_for, is_more, more_label
from ratui.console.lineage.layout import layout
from ratui.console.lineage.view import short_name, view, whole_fits
from ratui.engine.project.compiler import compile_project
from ratui.engine.project.dag import Graph
from ratui.screens.find_pipeline import FindPipelineScreen
from ratui.screens.lineage import LineageScreen
from tests.scale_project import plan

from .conftest import make_app, run, screen_text, settle, wait_for
from .lineage_project import FAN_IN, LONELY, LOOP, SIZE, WIDE, make_lineage_project
from .test_lineage import check_drawing

SMALL = (80, 24)
LARGE = (160, 48)
BRONZE = "sales.bronze.raw_00000"  # ten silvers read it, a dozen golds read those
GOLD = "sales.gold.mart_00005"  # reads three silvers, each reading one bronze; nothing reads it
TOTAL = SIZE + 4  # the generated pipelines, the wide mart, the lonely one and the two in a cycle
KEY_NAMES = {"_": "underscore", ".": "full_stop", " ": "space"}


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return make_lineage_project(tmp_path_factory.mktemp("lineage-scale") / "project")


@pytest.fixture(scope="module")
def compiled(big):
    return compile_project(big)


class CompiledOnce(Controller):
    """The real controller and engine, given the project compiled once for the module: compiling 1,500 pipelines
    takes seconds, and these tests are about the Lineage screen, not the compiler (benchmarks/scale_compile.py)."""

    def __init__(self, root, compiled) -> None:
        super().__init__(root)
        self._compiled_once = compiled

    def compile(self):
        return self._compiled_once


def within(graph: Graph, key: str, depth: int) -> set[str]:
    """Every pipeline up to `depth` edges upstream or downstream of `key` (breadth first, both ways)."""
    found = {key}
    for links in (graph.upstream, graph.downstream):
        seen, todo = {key}, deque([(key, 0)])
        while todo:
            node, far = todo.popleft()
            if far < depth:
                for near in links.get(node, ()):
                    if near not in seen:
                        seen.add(near)
                        todo.append((near, far + 1))
        found |= seen
    return found


def drawn_labels(v) -> dict[str, str]:
    return {n: more_label(len(v.focus.hidden[n])) if is_more(n) else f"· {short_name(n, v.namespace)}"
            for n in v.layout.nodes}


# ------------------------------------------------------------------------------------------------ pure layout


def test_a_focused_layout_holds_only_the_focus_and_its_neighbours(compiled):
    graph = compiled.graph
    for key in (BRONZE, "sales.silver.clean_00010", GOLD, "ops.gold.mart_00000"):  # the last reads two namespaces
        for depth in (1, 2):
            v = view(graph, key=key, depth=depth, width=158, height=200)  # room for every neighbour (fan 40)
            assert not v.whole and not v.fits
            expected = within(graph, key, depth)
            assert set(v.layout.nodes) == expected, (key, depth)
            assert len(v.layout.nodes) == len(expected)  # laid out: the neighbourhood, nothing else
            # columns are distances from the focus: upstream left, downstream right
            focus_column = v.layout.column[key]
            for node in graph.upstream[key]:
                assert v.layout.column[node] == focus_column - 1
            for node in graph.downstream[key]:
                assert v.layout.column[node] == focus_column + 1
            check_drawing(v.layout, v.drawing, drawn_labels(v))


def test_15000_pipelines_are_never_laid_out_whole():
    spaces = plan(15000)
    keys = [f"{ns}.{layer}.{name}" for ns, items in spaces.items() for layer, name, _, _ in items]
    upstream = {f"{ns}.{layer}.{name}": list(ups) for ns, items in spaces.items() for layer, name, ups, _ in items}
    downstream: dict[str, list[str]] = {k: [] for k in keys}
    for child, parents in upstream.items():
        for parent in parents:
            downstream[parent].append(child)
    graph = Graph(keys, upstream, downstream)
    assert not whole_fits(graph, 400, 200)  # refused on the count alone, before any layering
    for key in (keys[0], keys[len(keys) // 2], keys[-1]):
        v = view(graph, key=key, depth=3, width=300, height=100)
        assert not v.whole
        assert len(v.layout.nodes) <= BUDGET
        assert set(v.focus.pipelines) <= within(graph, key, 3)


def test_a_fan_in_of_300_shows_a_screenful_and_groups_the_rest(compiled):
    graph = compiled.graph
    for width, height in ((78, 16), (158, 40)):
        v = view(graph, key=WIDE, depth=1, width=width, height=height)
        fan = fan_for(height)
        parents = [n for n in v.layout.nodes if n != WIDE and not is_more(n)]
        groups = [n for n in v.layout.nodes if is_more(n)]
        assert len(parents) == fan - 1 and len(groups) == 1  # a screenful: fan rows, the last one the group
        assert sorted(parents + v.focus.hidden[groups[0]]) == sorted(graph.upstream[WIDE])
        assert f"… and {FAN_IN - len(parents)} more" in v.drawing.text()
        assert v.drawing.height <= height  # it reads without scrolling
        check_drawing(v.layout, v.drawing, drawn_labels(v))


def test_depth_beyond_the_graph_no_edges_and_a_cycle(compiled):
    graph = compiled.graph
    v = view(graph, key=GOLD, depth=9, width=158, height=40)
    assert v.focus.depth == 2 and not v.focus.deeper  # gold <- silver <- bronze: the lineage ends at 2
    assert set(v.layout.nodes) == within(graph, GOLD, 9)
    v = view(graph, key=LONELY, depth=3, width=78, height=16)
    assert v.layout.nodes == [LONELY] and v.focus.depth == 1 and not v.focus.deeper
    assert v.drawing.text().strip() == "· silver.lonely"
    v = view(graph, key=LOOP[0], depth=2, width=78, height=16)
    assert set(v.layout.nodes) == set(LOOP) and len(v.layout.back_edges) == 1  # one edge of the cycle is cut
    check_drawing(v.layout, v.drawing, drawn_labels(v))
    assert layout([], {}).nodes == []  # an empty project


def test_finding_a_pipeline_by_name(compiled):
    keys = list(compiled.graph.nodes)
    assert find("wide_mart", keys, "sales").matches == [WIDE]
    found = find("mart_00012", keys, "sales")
    assert found.matches[0].endswith(".mart_00012") and found.total == 3  # in each of the 3 namespaces
    assert find("gold mart_0001", keys, "sales").total == 30  # every word must be part of the key
    assert find("", keys, "sales", limit=10).total == len(keys)
    typo = find("wide_mrt", keys, "sales")
    assert typo.total == 0 and typo.close[0] == WIDE
    assert find("zzzz", keys, "sales").close == []


# --------------------------------------------------------------------------------------------------- the screen


async def type_text(pilot, text: str) -> None:
    await pilot.press(*[KEY_NAMES.get(c, c) for c in text])


def test_the_focused_view_keys_find_and_what_can_go_wrong(big, compiled):
    app = make_app(big, controller=CompiledOnce(big, compiled))
    graph = compiled.graph

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.show_pipeline(BRONZE, "lineage")  # g on Pipelines
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, LineageScreen)
            v = screen.view
            assert not v.whole and v.focus.key == BRONZE and screen.depth == 1  # depth 1 below 120 columns
            assert screen.selected == BRONZE
            text = screen_text(app)
            silvers = [n for n in v.layout.nodes if n.startswith("sales.silver.")]
            assert len(silvers) == v.fan - 1 == 6  # ten silvers: a screenful of rows, the last one the group
            assert f"Focus {BRONZE} · depth 1 (+/-) · 7 of {TOTAL:,} pipelines" in text
            assert "… and 4 more" in text
            assert "↑ 0 upstream · ↓ 24 downstream" in text  # the project's counts, not the view's

            await pilot.press("plus")
            await settle(pilot)
            assert screen.depth == 2 and screen.view.focus.depth == 2
            assert any(n.startswith("sales.gold.") for n in screen.view.layout.nodes)
            await pilot.press("plus")  # nothing is further: it says so and stays
            await settle(pilot)
            assert screen.depth == 2 and any("whole lineage is shown" in n for n in app.notices)
            await pilot.press("minus")
            await settle(pilot)
            assert screen.depth == 1 and not any(n.startswith("sales.gold.") for n in screen.view.layout.nodes)
            await pilot.press("minus")
            await settle(pilot)
            assert screen.depth == 1 and any("Depth 1 is the least" in n for n in app.notices)
            await pilot.press("a")
            await settle(pilot)
            assert not screen.view.whole and any("does not fit" in n for n in app.notices)

            # arrows move within the view; f focuses on the selection
            await pilot.press("right")
            await settle(pilot)
            silver = screen.selected
            assert silver in graph.downstream[BRONZE]
            await pilot.press("f")
            await settle(pilot)
            assert screen.view.focus.key == silver and screen.selected == silver

            # a typo: said, with the close names; enter takes the first
            await pilot.press("slash")
            await settle(pilot)
            finder = app.screen
            assert isinstance(finder, FindPipelineScreen)
            await type_text(pilot, "wide_mrt")
            await settle(pilot)
            assert "No pipeline is called 'wide_mrt'" in screen_text(app)
            options = finder.query_one(OptionList)
            assert options.get_option_at_index(0).id == WIDE
            await pilot.press("enter")
            await settle(pilot)
            assert app.screen is screen and screen.view.focus.key == WIDE and screen.selected == WIDE

            # the fan-in of 300: a screenful, the rest in one group; enter on it lists them
            group = next(n for n in screen.view.layout.nodes if is_more(n))
            hidden = screen.view.focus.hidden[group]
            screen.graph.select_node(group)
            screen.show_detail()
            await settle(pilot)
            assert f"{len(hidden)} more parents of gold.wide_mart" in screen_text(app)
            await pilot.press("enter")
            await settle(pilot)
            finder = app.screen
            assert isinstance(finder, FindPipelineScreen) and finder.keys == hidden
            await type_text(pilot, "00299")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert screen.view.focus.key == "sales.silver.clean_00299"

            # by name, exactly, with the namespace
            await pilot.press("slash")
            await settle(pilot)
            await type_text(pilot, GOLD)
            await settle(pilot)
            assert app.screen.query_one(Input).value == GOLD
            await pilot.press("enter")
            await settle(pilot)
            assert screen.view.focus.key == GOLD
            await pilot.press("slash", "escape")  # backs out: nothing changes
            await settle(pilot)
            assert app.screen is screen and screen.view.focus.key == GOLD

            # no edges: one node, and the keys say why nothing moves
            app.show_pipeline(LONELY, "lineage")
            await settle(pilot)
            assert screen.view.layout.nodes == [LONELY]
            assert "no upstream, no downstream" in screen_text(app)
            await pilot.press("u")
            await settle(pilot)
            assert any("nothing upstream" in n for n in app.notices)

            # a cycle: both broken, the screen still draws them
            app.show_pipeline(LOOP[0], "lineage")
            await settle(pilot)
            text = screen_text(app)
            assert "✘ silver.loop_a" in text and "✘ silver.loop_b" in text and "RAT-DAG-001" in text
            assert not app.crashes

    run(go())


def test_at_160x48_the_focus_starts_at_depth_2_and_a_resize_refits_it(big, compiled):
    app = make_app(big, controller=CompiledOnce(big, compiled))

    async def go():
        async with app.run_test(size=LARGE) as pilot:
            await settle(pilot)
            app.show_pipeline(WIDE, "lineage")
            await settle(pilot)
            screen = app.screen
            v = screen.view
            assert screen.depth == 2 and v.focus.key == WIDE
            shown = [n for n in v.layout.nodes if n.startswith("sales.silver.")]
            assert len(shown) == v.fan - 1
            await pilot.resize_terminal(*SMALL)
            await wait_for(pilot, lambda: screen.view.fan < v.fan, 30)  # the screen refits the view to its size
            await settle(pilot)
            assert screen.view.fan < v.fan and screen.view.focus.key == WIDE  # fewer rows: fewer per pipeline
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------------------- snapshots


def snap(snap_compare, app, key: str, size):
    async def run_before(pilot) -> None:
        await settle(pilot)
        pilot.app.show_pipeline(key, "lineage")
        await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshot_focused_80x24(snap_compare, big, compiled):
    """A bronze read by ten silvers: seven rows, the last one "… and 3 more"."""
    assert snap(snap_compare, make_app(big, controller=CompiledOnce(big, compiled)), BRONZE, SMALL)


def test_snapshot_focused_160x48(snap_compare, big, compiled):
    """The gold reading 300 silvers, to depth 2: a screenful of silvers with their bronzes, the rest grouped."""
    assert snap(snap_compare, make_app(big, controller=CompiledOnce(big, compiled)), WIDE, LARGE)
