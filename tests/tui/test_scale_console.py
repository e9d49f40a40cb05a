"""The console on a large project (issue 34): the Pipelines tree of a generated project opens by layer, is
filtered by name with `/` (esc clears), folds by namespace and layer with keys, and reads the history in a number of
SQLite statements that does not grow with the number of pipelines. No Spark: the App's Spark state is pinned.

Projects come from tests/scale_project.py (deterministic), generated once per module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scale_project import all_keys, generate_project, seed_runs

from .conftest import make_app, run, screen_text, settle
from .test_snapshots import SMALL, snap


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    """1,500 pipelines in three namespaces, with the last 12 runs of each (18,000 runs)."""
    root = generate_project(tmp_path_factory.mktemp("scale") / "p1500", 1500)
    seed_runs(root, 18_000, pipelines=all_keys(1500))
    return root


@pytest.fixture(scope="module")
def medium(tmp_path_factory) -> Path:
    """400 pipelines (one namespace): more than a project that opens fully expanded, quick to compile."""
    root = generate_project(tmp_path_factory.mktemp("scale") / "p400", 400)
    seed_runs(root, 4_000, pipelines=all_keys(400))
    return root


def shown(app) -> list[tuple]:
    """The data of every line of the Pipelines tree, top to bottom (what is expanded, and nothing else)."""
    tree = app.screen.query_one("#pipeline-tree")
    return [tree.get_node_at_line(line).data for line in range(tree.last_line + 1)]


def pipelines_shown(app) -> list[str]:
    return [data[1] for data in shown(app) if data[0] == "pipeline"]


def test_large_tree_80x24(snap_compare, large):
    """1,500 pipelines at 80x24: namespaces open, layers folded but the first pipeline's, each layer with its
    count and its last failures; the first pipeline selected with its statuses and durations."""
    assert snap(snap_compare, make_app(large), size=SMALL)


def test_filter_narrows_the_tree_and_esc_restores_it(medium):
    async def go():
        app = make_app(medium)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            before = shown(app)
            assert ("layer", "sales", "gold") in before and len(pipelines_shown(app)) == 26  # bronze open

            await pilot.press("slash", *"CLEAN_0001")  # case-insensitive, as typed
            await settle(pilot)
            expected = [f"sales.silver.clean_{i:05d}" for i in range(10, 20)]
            assert pipelines_shown(app) == expected
            assert shown(app)[:2] == [("namespace", "sales"), ("layer", "sales", "silver")]
            text = screen_text(app)
            assert "CLEAN_0001 10 of 400" in text and "clean_00019" in text and "raw_00000" not in text
            assert app.screen.selected == ("pipeline", "sales.silver.clean_00010")

            await pilot.press("enter")  # keeps the filter, back to the tree
            await settle(pilot)
            assert pipelines_shown(app) == expected and app.focused.id == "pipeline-tree"

            await pilot.press("escape")  # clears it
            await settle(pilot)
            assert {d for d in shown(app) if d[0] != "pipeline"} == {d for d in before if d[0] != "pipeline"}
            assert len(pipelines_shown(app)) == 249  # the selection's layer (silver) open, the rest folded
            assert app.screen.selected == ("pipeline", "sales.silver.clean_00010")
            assert "of 400" not in screen_text(app)

            # what is typed is text, never a pattern; no match says so; a long one is no trouble
            for odd in ("clean_0001[", "(.*)+", "ünïcødé ☃", "x" * 400, "%_'\\"):
                await pilot.press("slash")
                app.screen.query_one("#pipelines-filter").value = odd
                await settle(pilot)
                assert pipelines_shown(app) == [] and shown(app) == [("nomatch",)]
                assert "No pipeline matches" in screen_text(app)
                await pilot.press("escape")
                await settle(pilot)
                assert len(pipelines_shown(app)) == 249
            assert not app.crashes

    run(go())


def test_fold_and_unfold_by_namespace_and_layer(medium):
    async def go():
        app = make_app(medium)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            layers = [("layer", "sales", "bronze"), ("layer", "sales", "silver"), ("layer", "sales", "gold")]
            assert len(pipelines_shown(app)) == 26  # a large project opens by layer: the first layer open

            await pilot.press("left_square_bracket")  # every layer folded
            await settle(pilot)
            assert shown(app) == [("namespace", "sales"), *layers]
            await pilot.press("left_square_bracket")  # then every namespace
            await settle(pilot)
            assert shown(app) == [("namespace", "sales")]

            await pilot.press("right_square_bracket")  # namespaces open: their layers
            await settle(pilot)
            assert shown(app) == [("namespace", "sales"), *layers]
            await pilot.press("right_square_bracket")  # layers open: every pipeline, filled as they open
            await settle(pilot)
            assert len(pipelines_shown(app)) == 400 and len(shown(app)) == 404

            await pilot.press("left_square_bracket")
            await settle(pilot)
            tree = app.screen.query_one("#pipeline-tree")
            tree.move_cursor(app.screen.nodes["sales.gold"])
            await pilot.press("right")  # one layer open
            await settle(pilot)
            assert len(pipelines_shown(app)) == 125 and pipelines_shown(app)[0] == "sales.gold.mart_00000"
            await pilot.press("right")  # on an open layer: to its first pipeline
            await settle(pilot)
            assert app.screen.selected == ("pipeline", "sales.gold.mart_00000")
            await pilot.press("left")  # on a pipeline: to its layer
            await pilot.press("left")  # on an open layer: fold it
            await settle(pilot)
            assert shown(app) == [("namespace", "sales"), *layers]
            assert app.screen.selected == ("layer", "sales", "gold")
            await pilot.press("left", "left")  # to the namespace, and fold it
            await settle(pilot)
            assert shown(app) == [("namespace", "sales")]
            assert not app.crashes

    run(go())


def test_the_trees_history_read_is_a_bounded_number_of_statements(tmp_path):
    """The tree's read (the controller's `recent`, one per load) runs the same number of SQLite statements for
    150 pipelines as for 1,500: one query for every pipeline's last runs, never one per pipeline."""
    from ratui.console.controller import Controller
    from ratui.engine.facade.engine import Engine

    counted = {}
    for size in (150, 1500):
        root = generate_project(tmp_path / f"p{size}", size)
        keys = all_keys(size)
        seed_runs(root, 3 * size, pipelines=keys)
        controller = Controller(root)
        controller.engine = Engine.open(root)  # what boot() opens before the compile (this read needs no more)
        try:
            statements: list[str] = []
            controller.engine.state.history._conn.set_trace_callback(statements.append)
            recent = controller.recent()
        finally:
            controller.engine.close()
        assert set(recent) == set(keys) and all(len(runs) == 3 for runs in recent.values())
        counted[size] = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert len(counted[150]) == len(counted[1500]) <= 2, counted
