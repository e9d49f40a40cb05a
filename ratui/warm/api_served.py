"""The Python API's calls that need Spark, answered by the project's warm engine or the console serving the shell,
so that a script whose process has no Spark of its own gets them from Spark that is already warm: a query
(`p.sql(...).to_arrow()`, ratui/api/queries.py) and a run that is waited for (`p.run(...)`, ratui/api/project.py).

    api -> engine   {"api": "arrow", "sql", "ref", "limit", ...}  or  {"api": "run", "keys", "ref", "full_refresh",
                    "force", "atomic", "threads", ...}  (with "project", "fingerprint", "pid")  + one descriptor
    engine -> api   {"accepted": {...}}  or  {"elsewhere": why}  or  {"refused": why}
    engine -> api   {"rows": N}  (the rows written to the descriptor as an Arrow IPC stream), {"ran": N} (the runs'
                    results written to it as JSON)  or  {"error": {...}}

A query is the engine's query path with read_only on (the same refusals as in process: RAT-ACC-002 before Spark sees
the query); a run is an invocation recorded with trigger `api`, as in process. A caller from another environment is
answered "elsewhere" and works in its own process: unlike a command, it does not retire the engine (a notebook's
kernel rarely has the shell's environment). A caller that goes away (an interrupted cell) cancels its query's Spark
jobs, or its runs (their branches deleted, main unchanged).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from ratui.warm.served import log
from ratui.warm.wire import Reader, WireError, send


class ApiCall:
    """One API query in the engine's table of commands in flight (`ratui engine status` lists it)."""

    def __init__(self, message: dict) -> None:
        what = ["run", *[str(k) for k in message.get("keys") or []]] if message.get("api") == "run" else \
            ["sql", str(message.get("sql"))[:200]]
        self.argv = ["(python api)", *what]
        self.client_pid = message.get("pid")
        self.began = time.time()
        self.engines: list[Any] = []
        self.query_id: str | None = None
        self.engine: Any = None
        self.invocation: Any = None

    def signal(self, signum: int) -> None:  # the caller gone, the engine stopping: the query or the runs stop
        if self.invocation is not None:
            self.invocation.cancel()
        elif self.engine is not None and self.query_id is not None:
            self.engine.cancel_query(self.query_id)


def why_not(host: Any, message: dict, fds: list[int]) -> dict | None:
    if len(fds) != 1:
        return {"refused": "an API query comes with the descriptor its rows are written to"}
    if message.get("api") not in ("arrow", "run"):
        return {"refused": f"this engine answers no API call {message.get('api')!r}"}
    if message.get("project") != str(host.place.project):
        return {"refused": f"this engine serves {host.place.project}, not {message.get('project')}"}
    if host.retired:
        return {"elsewhere": f"the engine is stopping ({host.retired})"}
    if message.get("fingerprint") != host.fingerprint:
        return {"elsewhere": "another environment"}
    return None


def serve(host: Any, conn: socket.socket, reader: Reader, message: dict, out_fd: int) -> None:
    call = ApiCall(message)
    with host.lock:
        host.served_count += 1
        number = host.served_count
        host.in_flight[number] = call
        host.last_active = time.monotonic()
    log(f"command {number}: an API {'query' if message['api'] == 'arrow' else 'run'} (client pid {call.client_pid})")
    answer: dict = {"error": {"code": "RAT-ENG-004", "message": "the engine ended the query", "file": None,
                              "line": None, "hint": None}}
    try:
        send(conn, {"accepted": {"pid": os.getpid(), "since": host.since, "commands": number}})
        from ratui.engine.errors import RatuiError

        try:
            engine = host.open_engine(Path(str(message["project"])))
            call.engines.append(engine)
            call.engine, call.query_id = engine, f"api-{number}-{os.getpid()}"
            threading.Thread(target=_cancel_when_gone, args=(reader, call), name="ratui-api-caller",
                             daemon=True).start()
            if message["api"] == "run":
                answer = {"ran": _run(engine, message, call, out_fd)}
            else:
                answer = {"rows": _write(engine, message, call.query_id, out_fd)}
        except RatuiError as exc:
            answer = {"error": exc.to_dict()}
    finally:
        os.close(out_fd)
        host.finished(number)
    log(f"command {number}: {answer['error']['code'] if 'error' in answer else 'done'} in "
        f"{time.time() - call.began:.2f} s")
    try:
        send(conn, answer)
    except OSError:
        pass  # the caller went away: its query was cancelled


def _write(engine: Any, message: dict, query_id: str, out_fd: int) -> int:
    import pyarrow as pa

    limit = message.get("limit")
    result = engine.open_query(str(message["sql"]), ref=str(message["ref"]), query_id=query_id, read_only=True)
    try:
        table = result.to_arrow(limit if isinstance(limit, int) else None)
    finally:
        result.close()
    with open(out_fd, "wb", closefd=False) as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return table.num_rows


def _run(engine: Any, message: dict, call: ApiCall, out_fd: int) -> int:
    """The runs, waited for; their results (the engine's RunResult dicts) and the publish's outcome as JSON."""
    import json

    from ratui.engine.errors import RatuiError

    threads = message.get("threads")
    invocation = engine.invocation([str(k) for k in message["keys"]], trigger="api",
                                   full_refresh=bool(message.get("full_refresh")), force=bool(message.get("force")),
                                   threads=threads if isinstance(threads, int) else None, ref=str(message["ref"]),
                                   atomic=bool(message.get("atomic")))
    call.invocation = invocation
    invocation.start()
    invocation.wait()
    error = invocation.error
    if isinstance(error, RatuiError):
        raise error
    if error is not None:
        raise RatuiError("RAT-RUN-002", f"the invocation failed: {type(error).__name__}: {error}")
    publish = invocation.publish
    body = {"results": [r.to_dict() for r in invocation.results],
            "publish": None if publish is None else {"merged": publish.merged, "reason": publish.reason}}
    with open(out_fd, "w", encoding="utf-8", closefd=False) as sink:
        json.dump(body, sink, default=str)
    return len(body["results"])


def _cancel_when_gone(reader: Reader, call: ApiCall) -> None:
    try:
        message, _ = reader.next()
    except (OSError, WireError):
        message = None
    if message is None:
        call.signal(0)
