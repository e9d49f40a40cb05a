"""The console's History shows a commit another engine made through `ratui serve` like any other: its kind
(external) and its message saying it came through the REST catalog. No Spark: the project has no run."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

from ratui.rest import RestOptions, RestServer
from ratui.screens.history import HistoryScreen
from tests.servers import free_port
from tests.tui.conftest import make_app, run, screen_text, settle, wait_for


def test_the_history_screen_shows_an_outside_commit_as_external(empty_project):
    server = RestServer(empty_project, RestOptions(port=free_port())).start()
    try:
        server._catalog.create_branch("dev")
        dev = RestCatalog("dev", uri=server.url_of("dev"), token=server.token)
        dev.create_namespace(("demo", "silver"))
        schema = pa.schema([("id", pa.int64())])
        dev.create_table("demo.silver.outside", schema=schema).append(pa.table({"id": [1, 2]}, schema=schema))
    finally:
        server.stop()
    app = make_app(empty_project)

    async def go():
        async with app.run_test(size=(130, 42)) as pilot:
            await settle(pilot)
            app.push_screen(HistoryScreen("dev", origin="branches"))
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 20)
            await settle(pilot)
            table = app.screen.query_one("#history-table")
            kinds = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
            assert kinds[:3] == ["external", "external", "branch"]
            text = screen_text(app)
            assert "iceberg rest commit: demo.silver.outside" in text  # the newest commit's message, below

    run(go())
