"""The console's words follow the ref it works on (issue 48): working on dev, a run's recorded "main is unchanged"
reads "dev is unchanged", Runs says each run's ref, Query reads dev, the REST catalog's dialog gives dev's URI (and a
client without the token is told where the console showed it), turning the catalog off says so, and `z` on History
of main undoes main's newest action, not dev's. Real project state without Spark (test_branch_workflow's project)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from ratui.screens.dialogs import ConfirmScreen, ServingScreen
from ratui.screens.history import HistoryScreen

from .conftest import flat, make_app, run, screen_text, settle, wait_for
from .test_branch_workflow import ORDERS, SMALL, engine_of, goto, project, write  # noqa: F401 - the fixture
from .test_serve_toggle import free_port

DEV_RUN = "260301120000dddd01"


def record_failed_run_on_dev(engine) -> None:
    """A quality-gate failure of a run into dev, with the hint every such run records."""
    engine.state.history.db["runs"].insert({
        "id": DEV_RUN, "pipeline": ORDERS, "status": "failed", "trigger": "console", "strategy": "incremental",
        "queued_at": "2026-03-01T12:00:00.000Z", "started_at": "2026-03-01T12:00:00.000Z",
        "finished_at": "2026-03-01T12:00:05.000Z", "duration_ms": 5000, "rows_written": 0, "warnings": 0,
        "branch": f"run-{DEV_RUN}", "ref": "dev", "phases": json.dumps({"branch": 10, "quality": 900}),
        "error_code": "RAT-RUN-003", "error_message": f"quality gate failed for {ORDERS}: positive_amounts (3 rows)",
        "error_hint": "An error-severity quality test found violations; main is unchanged. See the quality results."})


def unauthorized(url: str) -> str:
    try:
        urllib.request.urlopen(f"{url}/v1/config", timeout=10)
    except urllib.error.HTTPError as error:
        return error.read().decode()
    return "no refusal"


def test_working_on_dev_the_console_says_dev(project, monkeypatch):  # noqa: F811
    root, first = project
    monkeypatch.setattr("ratui.rest.DEFAULT_PORT", free_port())
    app = make_app(root)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            engine = engine_of(app)
            engine.rollback(engine.plan_rollback("main", first.hash, ORDERS))  # main's newest action
            engine.create_branch("dev")
            before = engine.state.catalog.get_ref("dev").head
            write(engine, root, "dev", ORDERS, 2, start=100)
            engine.rollback(engine.plan_rollback("dev", before, ORDERS))  # dev's, newer
            record_failed_run_on_dev(engine)
            app.controller.switch_ref("dev")

            app.open_run(DEV_RUN)
            await settle(pilot)
            text = flat(screen_text(app))
            assert "dev is unchanged" in text and "main is unchanged" not in text, text

            await pilot.press("2")
            await settle(pilot)
            table = app.screen.table
            assert str(table.get_cell(DEV_RUN, "ref")) == "dev"

            await pilot.press("7")
            await settle(pilot)
            assert app.screen.ref == "dev" and app.screen.query_one("#query-ref").value == "dev"

            # History of main: z offers main's rollback, not dev's newer one
            app.action_open("branches")  # (the Query screen's editor has the keys)
            await settle(pilot)
            goto(app, "main")
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 10)
            await pilot.press("z")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            text = flat(screen_text(app))
            assert "One new commit on main" in text and "on dev" not in text, text
            await pilot.press("n")
            await settle(pilot)

            # the REST catalog: dev's URI; a client without the token is told where the console showed it
            app.action_toggle_serve()
            await wait_for(pilot, lambda: isinstance(app.screen, ServingScreen), 30)
            dialog = app.screen
            assert dialog.url.endswith("/iceberg/dev") and dialog.url in screen_text(app)
            refusal = await asyncio.to_thread(unauthorized, dialog.url)
            assert "RAT-REST-011" in refusal and "dialog" in refusal and "ratui serve" not in refusal, refusal
            await pilot.press("escape")
            await settle(pilot)
            app.action_toggle_serve()
            await wait_for(pilot, lambda: app.serving == "", 30)
            assert any("Iceberg REST catalog is off" in n for n in app.notices)
            assert not app.crashes

    run(go())
