"""The console serves its project's catalog to other engines (the Iceberg REST catalog of `ratui serve`), toggled from
the Branches screen (`i`) or the palette: a dialog gives the URL and the token, the status line says it is on (its
port only, never the token), PyIceberg's RestCatalog reads main's table through it with that token and is refused a
write to main, and toggling it off (or quitting) closes the port. No Spark: the table is written with PyIceberg on
the real catalog."""

from __future__ import annotations

import asyncio
import socket
import time

import pyarrow as pa
import pytest

from ratui.screens.dialogs import ServingScreen

from .conftest import copy_sample, make_app, run, screen_text, settle, wait_for

KEY = "ecommerce.silver.clean_orders"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def project(tmp_path, monkeypatch):
    from ratui.engine.facade.engine import Engine

    root = copy_sample(tmp_path)
    engine = Engine.open(root)
    catalog = engine.state.catalog
    table = catalog.create_table("main", KEY, pa.schema([("id", pa.int64())]), catalog.table_location(KEY))
    table.append(pa.table({"id": [3, 1, 2]}))
    catalog.record_commit("main", f"write {KEY}")
    engine.close()
    port = free_port()
    monkeypatch.setattr("ratui.rest.DEFAULT_PORT", port)  # the console serves on ratui serve's default port
    return root, port


def read_through(url: str, token: str) -> tuple[list[int], str]:
    """main's table as PyIceberg's RestCatalog reads it, and what a write to main gets."""
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("ratui", uri=url, token=token)
    table = catalog.load_table(("ecommerce", "silver", "clean_orders"))
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    try:
        table.append(pa.table({"id": pa.array([9], pa.int64())}))
        refusal = "written"
    except Exception as exc:  # noqa: BLE001 - the refusal's text is what the test reads
        refusal = f"{type(exc).__name__}: {exc}"
    return ids, refusal


def test_the_console_serves_the_catalog_and_stops_serving_it(project):
    root, port = project
    app = make_app(root)
    seen: dict[str, str] = {}

    async def go():
        async with app.run_test(size=(130, 42)) as pilot:
            await settle(pilot)
            await pilot.press("4", "i")
            await settle(pilot)
            await wait_for(pilot, lambda: isinstance(app.screen, ServingScreen))
            dialog = app.screen
            seen["token"] = dialog.token
            assert dialog.url == f"http://127.0.0.1:{port}/iceberg/main" and len(dialog.token) >= 16
            text = screen_text(app)
            assert dialog.url in text and dialog.token in text and "main" in text
            head = app.controller.engine.state.catalog.get_ref("main").head

            ids, refusal = await asyncio.to_thread(read_through, dialog.url, dialog.token)
            assert ids == [1, 2, 3]
            assert "RAT-REST" in refusal and "main" in refusal, refusal
            assert app.controller.engine.state.catalog.get_ref("main").head == head  # main unchanged

            await pilot.press("escape")
            await settle(pilot)
            status = screen_text(app)
            assert f"REST :{port}" in status and dialog.token not in status  # the port, never the token
            assert not any(dialog.token in notice for notice in app.notices)

            await pilot.press("i")  # off again
            await settle(pilot)
            await wait_for(pilot, lambda: app.serving == "")
            assert not listening(port)
            assert "REST :" not in screen_text(app)

            # on while another program holds 8181 (here: the test's port): a free port instead, said in the dialog;
            # then the console quits while serving and that port closes with it
            with socket.socket() as blocker:
                blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port may be in TIME_WAIT
                blocker.bind(("127.0.0.1", port))
                blocker.listen()
                await pilot.press("i")
                await settle(pilot)
                await wait_for(pilot, lambda: isinstance(app.screen, ServingScreen))
            other = int(app.screen.url.split(":")[2].split("/")[0])
            assert other != port and listening(other)
            seen["other"] = str(other)

    run(go())
    deadline = time.monotonic() + 10  # the server's thread stops after the App: requests in flight get seconds
    while listening(int(seen["other"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not listening(int(seen["other"]))
    log = (root / ".ratui" / "logs" / "serve.log").read_text()
    assert "GET /iceberg/main/v1/" in log and seen["token"] not in log  # requests are logged, the token never
