"""`ratui serve`: the Iceberg REST catalog served by this process, on 127.0.0.1 by default, behind a token.

`RestServer` runs the aiohttp server in a thread of its own with its own event loop, so a caller (the CLI, the
console later, a test) starts and stops it with two calls and keeps its own loop:

    server = RestServer(root, RestOptions(port=8181)).start()   # bound when start() returns, or a coded error
    server.url, server.token                                    # http://127.0.0.1:8181/iceberg/main, the token
    server.stop()

`serve()` is the command: the same server, its startup line, JSON events with --json, until Ctrl-C or SIGTERM.
The log (.ratui/logs/serve.log) has one line per request, its path only: the token travels in a header and never
reaches a log line or an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ratui.endpoint_access import DoorCodes, HostRules, bind_error, check_address, check_door, is_loopback, url_for
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN, format_duration
from ratui.rest.routes import make_app
from ratui.rest.shapes import RestError
from ratui.rest.tables import Tables

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8181  # Iceberg's own REST fixture's port; `ratui web` has 8000
TOKEN_ENV = "RATUI_SERVE_TOKEN"
LOG_NAME = "serve.log"
ADDRESS_CODES = {"in_use": "RAT-REST-001", "port": "RAT-REST-002", "host": "RAT-REST-003"}
DOOR_CODES = DoorCodes(port="RAT-REST-002", remote="RAT-REST-018", allow_host="RAT-REST-020", token="RAT-REST-019")

log = logging.getLogger("ratui.serve")


@dataclass
class RestOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None  # --token; else RATUI_SERVE_TOKEN; else a fresh one
    allow_hosts: list[str] = field(default_factory=list)
    allow_remote: bool = False
    read_only_refs: list[str] = field(default_factory=list)  # besides main
    writable_main: bool = False  # lift main's protection (outside engines may then publish to main directly)
    # where a client finds the token, as a 401 tells it (a console that serves shows it in a dialog)
    token_from: str = "the token `ratui serve` printed when it started"

    @property
    def read_only(self) -> frozenset[str]:
        return frozenset(self.read_only_refs) | (frozenset() if self.writable_main else frozenset({MAIN}))


def check_options(options: RestOptions) -> str:
    """Every refusal of the options, before anything listens; returns the token to require."""
    for ref in options.read_only_refs:
        if not ref.strip() or "@" in ref:
            raise RatuiError("RAT-REST-020", f"--read-only-ref '{ref[:60]}' is not a ref name")
    return check_door(host=options.host, port=options.port, allow_remote=options.allow_remote,
                      allow_hosts=options.allow_hosts, token=options.token, token_env=TOKEN_ENV, codes=DOOR_CODES)


def log_path(root: Path) -> Path:
    return root / ".ratui" / "logs" / LOG_NAME


class _AccessLog(AbstractAccessLogger):
    """One line per request: method, path (never a query or a header), status, time."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info("%s %s %s %s %.3fs", request.remote, request.method, request.rel_url.raw_path[:300],
                         response.status, time)


class RestServer:
    """The Iceberg REST catalog of the project at `root`, served from a thread of its own (see the module doc)."""

    def __init__(self, root: Path, options: RestOptions | None = None, *, token: str | None = None,
                 catalog: Any = None, log_to_file: bool = True) -> None:
        self.root = Path(root).resolve()
        self.options = options or RestOptions()
        self.token = token or check_options(self.options)
        self._catalog = catalog
        self._log_to_file = log_to_file
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self.refused = 0
        self.base = url_for(self.options.host, self.options.port)
        self.on_refused: Callable[[str, str], None] = lambda method, why: None

    @property
    def url(self) -> str:
        """The catalog URI of main (another ref: url_of(ref))."""
        return self.url_of(MAIN)

    def url_of(self, ref: str) -> str:
        return f"{self.base}/iceberg/{quote(ref, safe='@')}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _tables(self) -> Tables:
        catalog = self._catalog
        if catalog is None:
            from ratui.engine.state.project_state import ProjectState

            catalog = ProjectState.at(self.root).catalog
            self._catalog = catalog
        return Tables(catalog, self.options.read_only)

    def moved_from(self) -> list[str]:
        """The project's earlier folders that table files are still recorded under (it was moved or copied): ratui
        maps those paths to this folder, but another engine reads the paths the metadata holds, as they are."""
        from ratui.engine.locations import plain_path

        catalog = self._tables().catalog
        found = set()
        for pointer in catalog.every_pointer():
            path = plain_path(pointer.location)
            if path is None:
                continue
            for old in catalog.locations.earlier:
                if path.startswith(old.rstrip("/") + "/"):
                    found.add(old)
        return sorted(found)

    def _setup_logging(self) -> None:
        if not self._log_to_file:
            return
        path = log_path(self.root)
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        for name in ("ratui.serve", "aiohttp"):
            logger = logging.getLogger(name)
            logger.handlers[:] = [handler]
            logger.setLevel(logging.INFO)
            logger.propagate = False

    def _refused(self, request: web.Request, error: RestError) -> None:
        self.refused += 1
        log.warning("refused %s %s from %s: %s %s (Host %r, Origin %r)", request.method, request.rel_url.raw_path[:200],
                    request.remote, error.status, error.message, (request.headers.get("Host") or "-")[:100],
                    (request.headers.get("Origin") or "-")[:100])
        self.on_refused(request.method, error.message)

    def start(self) -> "RestServer":
        """Listen; returns once the port is bound (or raises the coded error that kept it from binding)."""
        check_address(self.options.host, self.options.port, ADDRESS_CODES)
        tables = self._tables()  # the catalog opens here, in the caller's thread: its errors are the caller's
        self._setup_logging()
        self._thread = threading.Thread(target=self._run, args=(tables,), name="ratui-serve", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            self._thread.join()
            raise self._failed
        return self

    def _run(self, tables: Tables) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve(tables))
        except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
            self._failed = exc if isinstance(exc, RatuiError) else RatuiError(
                "RAT-REST-017", f"the server stopped: {type(exc).__name__}: {str(exc)[:200]}")
            log.exception("the server stopped")
        finally:
            self._ready.set()
            self._loop.close()

    async def _serve(self, tables: Tables) -> None:
        self._stop = asyncio.Event()
        own = [] if self.options.host in ("0.0.0.0", "::", "") else [self.options.host]
        if self.options.host in ("0.0.0.0", "::"):
            own.append(socket.gethostname())
        rules = HostRules(port=self.options.port, allowed_hosts=list(self.options.allow_hosts), own_hosts=own)
        app = make_app(tables, self.token, rules, self._refused, token_from=self.options.token_from)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=3.0, access_log_class=_AccessLog,
                               access_log=logging.getLogger("aiohttp.access"))
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.options.host, self.options.port)
            try:
                await site.start()
            except OSError as exc:  # taken between our check and now
                raise bind_error(self.options.host, self.options.port, exc, ADDRESS_CODES) from None
            log.info("serving %s at %s (read-only refs: %s)", self.root, self.base,
                     ", ".join(sorted(self.options.read_only)) or "none")
            self._ready.set()
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def stop(self) -> None:
        """Stop listening and wait for the thread (requests in flight get a few seconds to finish)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and self.running:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "RestServer":
        return self.start() if not self.running else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(root: Path, options: RestOptions | None = None, *, as_json: bool = False) -> None:
    """Serve the project's catalog until Ctrl-C or SIGTERM. Raises RatuiError (RAT-REST-*) when the options are
    refused or host:port cannot be listened on, before anything is served."""
    options = options or RestOptions()

    def say(kind: str, text: str, **data: Any) -> None:
        if as_json:
            print(json.dumps({"event": kind, **data, "message": text}), flush=True)
        else:
            print(f"ratui serve: {text}" if kind != "serving" else text,
                  file=sys.stderr if kind == "warning" else sys.stdout, flush=True)

    server = RestServer(root, options)
    stopping = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    began = time.monotonic()
    try:
        server.start()
        loopback = is_loopback(options.host)
        if not loopback:
            say("warning", f"listening on {options.host}, not only this machine: anyone who can reach port "
                           f"{options.port} and has the token can read (and write to the writable refs of) this "
                           "project's catalog, and the traffic (the token included) is NOT encrypted: put it behind "
                           "a TLS proxy", host=options.host, port=options.port, loopback=False)
        read_only = sorted(options.read_only)
        say("serving", f"serving ratui's Iceberg REST catalog at {server.url}  token {server.token}",
            url=server.url, base=server.base, token=server.token, project=str(server.root), host=options.host,
            port=options.port, loopback=loopback, read_only_refs=read_only)
        for old in server.moved_from():
            say("warning", f"tables of this project were written when it lived at {old}: their metadata names files "
                           "there. ratui maps them to this folder; another engine reads the paths as they are and will "
                           f"not find them. Link the old folder to this one (ln -s {server.root} {old}) or serve the "
                           "project from there", moved_from=old, project=str(server.root))
        if not as_json:
            say("note", "other refs: /iceberg/REF (a ref with a slash URL-encoded: dev%2Falice; a past state "
                        "REF@COMMIT, read only); "
                + (f"read-only to outside writers: {', '.join(read_only)}" if read_only else
                   "every ref is writable, main included (--writable-main)") + "; Ctrl-C stops")
        while not stopping.wait(0.5):
            if not server.running:
                break
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    say("stopped", f"stopped after {format_duration((time.monotonic() - began) * 1000)}, {server.refused} "
                   "request(s) refused", refused=server.refused)
