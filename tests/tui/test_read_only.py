"""A read-only console (`ratui tui --read-only`, and every session of `ratui web --read-only`): it shows the project
and answers queries that read; every key that would change something is refused with a toast naming why, and
nothing changes: no run, no branch made, merged or deleted, no landing reset, no reaper pass, no file written.

Real project state (a catalog with tables written by PyIceberg, a dev branch), no Spark: every refusal comes
before Spark would be needed, the query's included.
"""

from __future__ import annotations

import pytest

from ratui.console.controller import Controller
from ratui.engine.errors import RatuiError

from .conftest import make_app, screen_text, settle, wait_for
from .test_branch_workflow import ORDERS, engine_of, goto, project  # noqa: F401 - the fixture

SMALL = (80, 24)


def refused(app, what: str) -> bool:
    return any("RAT-ACC-001" in n and what in n for n in app.notices)


def test_every_change_is_refused_with_a_toast_and_nothing_changes(project):  # noqa: F811
    root, _first = project
    app = make_app(root, read_only=True)

    async def go():
        async with app.run_test(size=(130, 42)) as pilot:
            await settle(pilot)
            engine = engine_of(app)
            engine.create_branch("dev")
            runs_before = engine.state.history.count_runs()
            main_before = engine.state.catalog.get_ref("main").head
            assert "read-only" in screen_text(app)  # the status line says so

            # Pipelines: run, run all, full refresh, force, downstream, publish, edit, cancel, watch
            for key, what in (("r", "running a pipeline"), ("a", "running pipelines"),
                              ("f", "running a pipeline"), ("F", "running a pipeline"),
                              ("plus", "running pipelines"), ("P", "publishing"),
                              ("e", "editing a pipeline's file"), ("w", "watch mode")):
                await pilot.press(key)
                await settle(pilot, 2)
                assert refused(app, what), (key, list(app.notices)[-3:])
            assert app.watch_mode == "off"
            assert app.controller.engine.active_runs() == []

            # Branches: new, merge and delete refused; the dev branch stays, main unchanged
            await pilot.press("4")
            await settle(pilot)
            goto(app, "dev")
            for key, what in (("n", "creating a branch"), ("m", "merging a branch"), ("d", "deleting a branch"),
                              ("i", "serving the catalog to other engines")):
                await pilot.press(key)
                await settle(pilot, 2)
                assert refused(app, what), (key, list(app.notices)[-3:])
            assert "dev" in [r.name for r in engine.refs()]
            # History of main: roll back refused
            goto(app, "main")
            await pilot.press("l")
            await settle(pilot)
            await pilot.press("r")
            await settle(pilot, 2)
            assert refused(app, "rolling back")
            await pilot.press("escape")
            await settle(pilot)

            # Landing: reset a file, a zone
            await pilot.press("5")
            await settle(pilot)
            for key, what in (("u", "resetting a landing file"), ("U", "resetting a landing zone")):
                await pilot.press(key)
                await settle(pilot, 2)
                assert refused(app, what)

            # Reaper: a pass refused, its preview (a dry run) allowed
            await pilot.press("6")
            await settle(pilot)
            await pilot.press("x")
            await settle(pilot, 2)
            assert refused(app, "a reaper pass")
            assert engine.reaper().reports(5) == []

            # Query: a statement that writes is refused before Spark (RAT-ACC-002), export refused
            await pilot.press("7")
            await settle(pilot)
            editor = app.screen.query_one("#query-editor")
            target = root.parent / "written-by-a-read-only-console"
            editor.text = f"INSERT OVERWRITE DIRECTORY '{target}' SELECT 1"
            await pilot.press("f5")
            await wait_for(pilot, lambda: "RAT-ACC-002" in screen_text(app) or
                           any("RAT-ACC-002" in n for n in app.notices), 20)
            assert not target.exists() and app.controller._queries == {}  # refused before Spark saw it
            await pilot.press("ctrl+s")
            await settle(pilot, 2)
            assert refused(app, "exporting a result to a file")

            assert engine.state.catalog.get_ref("main").head == main_before
            assert engine.state.history.count_runs() == runs_before
            assert [r.name for r in engine.refs()].count("dev") == 1
            assert not (root / ".ratui" / "query_history.jsonl").exists()  # no trace left
            assert app.crashes == []

    import asyncio

    asyncio.run(go())


def test_the_controller_refuses_changes_whatever_path_reaches_it(project):  # noqa: F811
    root, _first = project
    controller = Controller(root, read_only=True)
    controller.boot(lambda: None)
    try:
        calls = [
            ("running a pipeline", lambda: controller.start(ORDERS)),
            ("running pipelines", lambda: controller.start_batch([ORDERS])),
            ("cancelling a run", lambda: controller.cancel("nosuch")),
            ("merging a branch", lambda: controller.merge("dev")),
            ("creating a branch", lambda: controller.create_branch("dev2")),
            ("deleting a branch", lambda: controller.delete_branch("dev")),
            ("rolling back", lambda: controller.rollback(None)),
            ("exporting a result to a file", lambda: controller.export_query("q", "out.csv")),
            ("resetting landing files", lambda: controller.landing_reset("orders")),
            ("a reaper pass", lambda: controller.reaper_run(False)),
            ("watch mode", lambda: controller.start_watch()),
        ]
        for what, call in calls:
            with pytest.raises(RatuiError) as error:
                call()
            assert error.value.code == "RAT-ACC-001" and what in error.value.message
        assert controller.reaper_run(True) is not None  # a preview changes nothing: allowed
        assert "dev2" not in [r.name for r in controller.engine.refs()]
        with pytest.raises(RatuiError) as error:
            controller.open_query("DROP TABLE silver.clean_orders", "main", "q1")
        assert error.value.code == "RAT-ACC-002"
    finally:
        controller.close()
