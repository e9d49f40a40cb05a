"""A moved project through `ratui serve`: its tables' metadata still names files under the folder the project was
written in. ratui maps those paths; another engine reads them as they are. The server says so when it starts,
naming the old folder and the link that fixes it, and with that link PyIceberg reads the table through it. No Spark:
the table is written with PyIceberg on the real catalog."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

from tests.servers import free_port

KEY = "demo.silver.orders"
TOKEN = "moved-project-token-0123456789"


def events_until(proc: subprocess.Popen, kind: str, seconds: float = 60.0) -> list[dict]:
    """The server's JSON events up to and including the first of `kind` (or the end of its output, or the deadline:
    the warning follows the serving line once the catalog is open). Lines are read by a thread: a select() on the
    pipe says nothing about lines readline() already pulled into its buffer (the serving line and the warning
    often arrive in one read)."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(proc.stdout.readline, "")] and None,
                     daemon=True).start()
    events: list[dict] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None and lines.empty():
                break
            continue
        events.append(json.loads(line))
        if events[-1]["event"] == kind:
            return events
    return events


def test_a_moved_projects_tables_are_said_and_read_once_the_old_folder_is_linked(tmp_path):
    from ratui.engine.facade.engine import Engine

    first = tmp_path / "first" / "p"
    first.mkdir(parents=True)
    (first / "ratui.yaml").write_text("namespace: demo\n")
    engine = Engine.open(first)
    catalog = engine.state.catalog
    catalog.create_table("main", KEY, pa.schema([("id", pa.int64())]),
                         catalog.table_location(KEY)).append(pa.table({"id": [2, 1]}))
    catalog.record_commit("main", f"write {KEY}")
    engine.close()
    moved = tmp_path / "moved"
    shutil.move(str(first), str(moved))

    port = free_port()
    env = {**os.environ, "RATUI_SERVE_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ratui", "serve", "--project", str(moved), "--port", str(port),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        events = events_until(proc, "warning")
        warnings = [e for e in events if e["event"] == "warning"]
        assert [w["moved_from"] for w in warnings] == [str(first)], events
        assert f"ln -s {moved} {first}" in warnings[0]["message"]

        rest = RestCatalog("ratui", uri=f"http://127.0.0.1:{port}/iceberg/main", token=TOKEN)
        table = rest.load_table(("demo", "silver", "orders"))
        try:  # the paths the metadata names are the old folder's: gone
            table.scan().to_arrow()
            raise AssertionError("read a moved project's files at paths that no longer exist")
        except FileNotFoundError:
            pass
        first.symlink_to(moved)  # the link the warning names
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
