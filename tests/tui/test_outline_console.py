"""The console at launch draws the Pipelines tree from the last compile's outline (`.ratui/outline.json`) before its
own compile is done, says so, and keeps what needs the compiled project (a run, the detail) until it is; then the
compiled project replaces it, with pipelines gone since the last compile gone from the tree. No Spark.

The compile is held back by a gate in front of the real controller's boot (the real compile runs once the gate
opens), so the moment between the two is there to look at, on any machine."""

from __future__ import annotations

import asyncio
import shutil
import threading

from ratui.console.controller import Controller
from ratui.engine.project.compiler import compile_project

from .conftest import copy_sample, make_app, run, screen_text, settle


class GatedController(Controller):
    """The console's controller whose boot (settings, engine, compile) waits for the test to open the gate."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()

    def boot(self, notify):
        self.gate.wait(60)
        return super().boot(notify)


def keys_in_tree(app) -> list[str]:
    tree = app.screen.query_one("#pipeline-tree")
    return [d[1] for d in (tree.get_node_at_line(i).data for i in range(tree.last_line + 1)) if d[0] == "pipeline"]


async def until(pilot, predicate, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
        await pilot.pause()
    raise AssertionError("timed out")


def test_the_tree_is_drawn_from_the_last_compile_until_the_compile_replaces_it(tmp_path):
    root = copy_sample(tmp_path)
    compile_project(root)  # the last session's compile
    gone = "ecommerce.gold.daily_revenue"
    shutil.rmtree(root / "ecommerce" / "pipelines" / "gold" / "daily_revenue")  # removed since

    async def go():
        controller = GatedController(root)
        app = make_app(root, controller=controller)
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: "outline_painted" in app.marks)
            await pilot.pause()
            assert app.compiled is None
            shown = keys_in_tree(app)
            assert gone in shown  # as last compiled
            text = screen_text(app)
            assert "as last compiled · checking the project…" in text
            assert "Checking the project" in text
            await pilot.press("r")  # a run needs the compiled project: nothing starts
            await pilot.pause()
            assert not app.store.active() and controller.engine is None
            assert not app.notices  # disabled, not a "select a pipeline" toast about a pipeline that is selected

            controller.gate.set()
            await until(pilot, lambda: app.compiled is not None)
            await settle(pilot)
            shown = keys_in_tree(app)
            assert gone not in shown and "ecommerce.bronze.raw_orders" in shown
            text = screen_text(app)
            assert "as last compiled" not in text and "on main" in text

    run(go())


def test_without_an_outline_the_console_compiles_at_once(tmp_path):
    root = copy_sample(tmp_path)  # never compiled

    async def go():
        app = make_app(root)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.compiled is not None)
            await settle(pilot)
            assert "outline_painted" not in app.marks and keys_in_tree(app)
        assert (root / ".ratui" / "outline.json").is_file()  # the next launch has one

    run(go())
