"""`ratui web`: the console in a browser, served by textual-serve, behind a token.

textual-serve serves a page whose JavaScript terminal talks to the server over a websocket; for each websocket
(each browser tab) the server starts one `ratui tui --project DIR` process and relays its screen and keys. So
every session is a whole console with its own engine and its own Spark (a JVM in local mode): two tabs are two
Sparks, and `--max-sessions` bounds them. textual-serve itself has no authentication: every request passes
through access.py first (token or cookie, Host allow-list, the websocket's Origin), so a request that is
refused starts nothing. The server binds 127.0.0.1; another address must be asked for with --allow-remote.

What the terminal shows is ratui's own lines; textual-serve's and aiohttp's logging and each session's stderr go
to .ratui/logs/web.log (never a token: the access log keeps the path without its query).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import signal
import socket
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import aiohttp_jinja2
from aiohttp import WSMsgType, web
from aiohttp.abc import AbstractAccessLogger
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from ratui.endpoint_access import (
    DoorCodes, bind_error as _bind_error, check_address, check_door, is_loopback, url_for,
)
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import format_duration
from ratui.web import registry
from ratui.web.access import TOKEN_ENV, Access, add_headers, new_token, refusal

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 3  # each tab is a console with its own Spark (a JVM)
DEFAULT_IDLE_MINUTES = 60.0  # a session with no key, click or resize for this long is closed (0: never)
SESSION_STOP_SECONDS = 10.0  # a session's console gets this long to quit (its Spark stops with it) before a kill
CLOSE_SECONDS = 3.0  # a browser that does not answer the websocket's close holds nothing up longer than this
SLOT_WAIT_SECONDS = 3.0  # a page asked for while every session is taken waits this long for one (a tab reloading)
IDLE_CLOSE_CODE = 4000  # the websocket close code of an idle session (4000-4999: the application's own)
LOG_NAME = "web.log"
SESSIONS_NOTE = ("each browser tab starts its own console process with its own Spark (a JVM: several hundred MB "
                 "and some seconds to start); close the tabs you do not use")
INPUTS = ("stdin", "resize", "focus", "blur")  # what a person does in the page (pings are the page's own)

log = logging.getLogger("ratui.web")
DOOR_CODES = DoorCodes(port="RAT-WEB-002", remote="RAT-WEB-004", allow_host="RAT-WEB-007", token="RAT-WEB-005")


@dataclass
class WebOptions:
    """`ratui web`'s options, checked by check_options() before anything starts."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None  # --token; else RATUI_WEB_TOKEN; else a fresh one
    allow_hosts: list[str] = field(default_factory=list)
    allow_remote: bool = False
    certfile: str | None = None
    keyfile: str | None = None
    read_only: bool = False
    max_sessions: int = DEFAULT_MAX_SESSIONS
    idle_minutes: float = DEFAULT_IDLE_MINUTES

    @property
    def scheme(self) -> str:
        return "https" if self.certfile else "http"


def session_command(root: Path, read_only: bool = False) -> str:
    """The shell command textual-serve runs per session: this Python's ratui on the project. `exec` keeps no
    shell between the server and the console (stopping the session stops the console itself); stderr goes to
    the log, never over the server's terminal."""
    words = [sys.executable, "-m", "ratui", "tui", "--project", str(root)] + (["--read-only"] if read_only else [])
    # a session's JVM maps the installation's class archive but never writes one: writing takes its JVM tens of
    # seconds after the console quits, which a closed tab must not wait for (a `ratui run` writes it)
    return f"RATUI_JVM_ARCHIVE=map exec {shlex.join(words)} 2>>{shlex.quote(str(log_path(root)))}"


def log_path(root: Path) -> Path:
    return root / ".ratui" / "logs" / LOG_NAME


def check_options(options: WebOptions) -> tuple[str, ssl.SSLContext | None]:
    """Every refusal of the options, before anything listens: (the token, the TLS context or None)."""
    if options.max_sessions < 1:
        raise RatuiError("RAT-WEB-007", f"--max-sessions {options.max_sessions}: at least one session is needed")
    if options.idle_minutes < 0:
        raise RatuiError("RAT-WEB-007", f"--idle-timeout {options.idle_minutes:g}: minutes, 0 or more")
    # the environment's token is read once: the sessions' consoles never see it
    token = check_door(host=options.host, port=options.port, allow_remote=options.allow_remote,
                       allow_hosts=options.allow_hosts, token=options.token, token_env=TOKEN_ENV, codes=DOOR_CODES,
                       keep_env=False)
    return token, tls_context(options)


def tls_context(options: WebOptions) -> ssl.SSLContext | None:
    if not options.certfile and not options.keyfile:
        return None
    if not options.certfile or not options.keyfile:
        raise RatuiError("RAT-WEB-006", "--certfile and --keyfile go together: give both, or neither")
    for option, name in (("--certfile", options.certfile), ("--keyfile", options.keyfile)):
        if not Path(name).is_file():
            raise RatuiError("RAT-WEB-006", f"{option} {name}: no such file", file=name)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(options.certfile, options.keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise RatuiError("RAT-WEB-006", f"the certificate {options.certfile} and key {options.keyfile} cannot be "
                         f"used: {getattr(exc, 'reason', None) or exc.strerror or exc}") from None
    return context


class ConsoleServer(Server):
    """textual-serve's Server for one ratui project: the access rules in front of every route, our own start and
    stop, quiet logging, page URLs taken from the request (so a server bound to 0.0.0.0 hands the browser a
    websocket address it can reach), sessions bounded and timed out when idle, and every session tracked so that
    stopping the server stops every console it started."""

    def __init__(self, root: Path, options: WebOptions | None = None, *, token: str | None = None,
                 out: Callable[[str], None] | None = None,
                 tell: Callable[..., None] | None = None) -> None:
        self.root = Path(root).resolve()
        self.options = options or WebOptions()
        super().__init__(session_command(self.root, self.options.read_only), host=self.options.host,
                         port=self.options.port, title=f"ratui · {self.root.name}")
        own = [] if self.options.host in ("0.0.0.0", "::", "") else [self.options.host]
        if self.options.host in ("0.0.0.0", "::"):
            own.append(socket.gethostname())  # the name the startup line prints
        self.access = Access(port=self.options.port, allowed_hosts=list(self.options.allow_hosts), own_hosts=own,
                             secure=bool(self.options.certfile), token=token or new_token())
        self.out = out or (lambda line: print(line, flush=True))
        self.tell = tell or (lambda kind, text, **data: self.out(f"ratui web: {text}"))
        self.sessions: dict[AppService, web.WebSocketResponse] = {}
        self.taking = 0  # sessions counted against --max-sessions: started or starting
        self.opened = 0
        self.refused = 0
        self.idle_closed = 0
        self._last_input: dict[AppService, float] = {}

    # --------------------------------------------------------------------------------------- logging

    def initialize_logging(self) -> None:
        """textual-serve's and aiohttp's records (access log included) go to .ratui/logs/web.log, not the
        terminal; an error there gets one line on the terminal naming the file."""
        path = log_path(self.root)
        path.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(path, encoding="utf-8")
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        to_terminal = _OneLine(self.out, path)
        for name in ("textual-serve", "aiohttp", "ratui.web"):
            logger = logging.getLogger(name)
            logger.handlers[:] = [to_file, to_terminal]
            logger.setLevel(logging.INFO)
            logger.propagate = False

    def _refused(self, request: web.Request, status: int, why: str) -> None:
        self.refused += 1
        origin = (request.headers.get("Origin") or "-")[:200]
        host = (request.headers.get("Host") or "-")[:200]
        log.warning("refused %s %s from %s: %s (%s; Host %r, Origin %r)", request.method, request.path[:200],
                    request.remote, why, status, host, origin)

    # ----------------------------------------------------------------------------------------- pages

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.access.middleware(self._refused))
        app.on_response_prepare.append(add_headers)
        return app

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> Any:
        if not await self._slot_free():
            return self._full_page()
        base = f"{request.scheme}://{request.host}"
        static = base + str(request.app.router["static"].url_for(filename="/")).rstrip("/") + "/"
        websocket = "ws" + base[len("http"):] + str(request.app.router["websocket"].url_for())
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": websocket,
            "config": {"static": {"url": static}},
            "application": {"name": self.title},
        }

    async def _slot_free(self) -> bool:
        """A session can start now, or within SLOT_WAIT_SECONDS (a reloaded tab's old session is still closing)."""
        deadline = time.monotonic() + SLOT_WAIT_SECONDS
        while self.taking >= self.options.max_sessions:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    def _full_page(self) -> web.Response:
        limit = self.options.max_sessions
        return refusal(503, f"All {limit} session(s) of this server are in use",
                       f"Each browser tab is a console with its own Spark, and this server allows {limit} at "
                       "once (--max-sessions). Close another tab of it and reload this one, or restart ratui web "
                       "with a higher --max-sessions.")

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's handler, bounded by --max-sessions, with the session recorded while it lives."""
        if self.taking >= self.options.max_sessions:
            self._refused(request, 503, f"all {self.options.max_sessions} session(s) in use")
            return self._full_page()
        self.taking += 1
        websocket = web.WebSocketResponse(heartbeat=15, timeout=CLOSE_SECONDS)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        service: AppService | None = None
        idle: asyncio.Task | None = None
        try:
            await websocket.prepare(request)

            async def close() -> None:  # the console exited (Ctrl+Q in the page): the tab's websocket closes
                await websocket.close()

            service = AppService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=close, download_manager=self.download_manager, debug=self.debug)
            self.sessions[service] = websocket
            self._last_input[service] = time.monotonic()
            self.opened += 1
            await service.start(width, height)
            origin = request.headers.get("Origin", "-")[:200]
            log.info("session %s opened from %s (Origin %s; console pid %s; %d of %d)", service.app_service_id[:8],
                     request.remote, origin, _pid(service), self.taking, self.options.max_sessions)
            self.tell("session", f"session {service.app_service_id[:8]} opened from {request.remote} (Origin "
                      f"{origin}), {self.taking} of {self.options.max_sessions}", session=service.app_service_id[:8],
                      remote=request.remote, origin=origin, pid=_pid(service))
            if self.options.idle_minutes > 0:
                idle = asyncio.create_task(self._close_when_idle(service, websocket))
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # noqa: BLE001 - one broken session must not stop the server
            log.exception(error)
        finally:
            if idle is not None:
                idle.cancel()
            if service is not None:
                await self._stop_session(service)
                log.info("session %s closed", service.app_service_id[:8])
                self.tell("session-closed", f"session {service.app_service_id[:8]} closed",
                          session=service.app_service_id[:8])
            self.taking -= 1
        return websocket

    async def _process_messages(self, websocket: web.WebSocketResponse, app_service: AppService) -> None:
        """textual-serve's relay of the page's messages, noting when a person last did something."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
                kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            except (ValueError, TypeError, IndexError, KeyError):
                continue  # not the page's shape: ignored, as a page would never send it
            if kind in INPUTS:
                self._last_input[app_service] = time.monotonic()
            if kind == "stdin" and isinstance(data, str):
                await app_service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await app_service.set_terminal_size(to_int(str(data.get("width")), 80),
                                                    to_int(str(data.get("height")), 24))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await app_service.blur()
            elif kind == "focus":
                await app_service.focus()

    async def _close_when_idle(self, service: AppService, websocket: web.WebSocketResponse) -> None:
        limit = self.options.idle_minutes * 60
        while not websocket.closed:
            quiet = time.monotonic() - self._last_input.get(service, time.monotonic())
            if quiet >= limit:
                self.idle_closed += 1
                log.info("session %s idle for %s: closed", service.app_service_id[:8],
                         format_duration(quiet * 1000))
                await websocket.close(code=IDLE_CLOSE_CODE, message=b"idle")
                return
            await asyncio.sleep(min(limit - quiet, 30.0) + 0.05)

    async def _stop_session(self, service: AppService) -> None:
        """Ask the console to quit; kill it if it has not within SESSION_STOP_SECONDS."""
        self.sessions.pop(service, None)
        self._last_input.pop(service, None)
        try:
            await asyncio.wait_for(service.stop(), SESSION_STOP_SECONDS)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - the kill below is the answer to any of them
            pass
        process = service._process  # textual-serve keeps it private; the kill is our last resort
        if process is not None and process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), 2.0)
            except asyncio.TimeoutError:
                log.warning("session %s did not quit within 2 s of its tab closing: killed",
                            service.app_service_id[:8])
                process.kill()
                await process.wait()

    async def on_startup(self, app: web.Application) -> None:
        """(textual-serve prints its logo here; serve() says what is served once the port is bound.)"""

    async def on_shutdown(self, app: web.Application) -> None:
        """Stop every session's console and close its websocket, so the server's shutdown does not wait for
        browsers."""
        sessions = list(self.sessions.items())
        await asyncio.gather(*(self._stop_session(service) for service, _ws in sessions), return_exceptions=True)
        await asyncio.gather(*(ws.close() for _service, ws in sessions), return_exceptions=True)

    def kill_sessions(self) -> None:
        """A second Ctrl+C: no waiting for consoles to quit."""
        for service in list(self.sessions):
            process = service._process
            if process is not None and process.returncode is None:
                process.kill()

    # ------------------------------------------------------------------------------------------- run

    async def run(self, stop: asyncio.Event, on_serving: Callable[[str], None],
                  context: ssl.SSLContext | None = None) -> None:
        """Listen until `stop` is set, then stop every session and the server."""
        app = await self._make_app()
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=5.0, access_log_class=_AccessLog,
                               access_log=logging.getLogger("aiohttp.access"))
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, ssl_context=context)
            try:
                await site.start()
            except OSError as exc:  # taken between our check and now
                raise _bind_error(self.host, self.port, exc) from None
            on_serving(url_for(self.host, self.port, self.options.scheme))
            await stop.wait()
        finally:
            await runner.cleanup()


class _AccessLog(AbstractAccessLogger):
    """One line per request, its path without the query (a token in `?token=` never reaches the log)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info("%s %s %s %s %.3fs", request.remote, request.method, request.path[:300], response.status,
                         time)


class _OneLine(logging.Handler):
    """Errors of textual-serve or aiohttp as one terminal line pointing at the log (never a traceback)."""

    def __init__(self, out: Callable[[str], None], path: Path) -> None:
        super().__init__(level=logging.ERROR)
        self.out = out
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        try:
            first = record.getMessage().strip().splitlines()[0][:200] if record.getMessage().strip() else "error"
            self.out(f"ratui web: {first} (details in {self.path})")
        except Exception:  # noqa: BLE001 - logging must never raise
            pass


def _pid(service: AppService) -> int | None:
    process = service._process
    return process.pid if process is not None else None


def serve(root: Path, options: WebOptions | None = None, *, as_json: bool = False) -> None:
    """Serve the console for the project at `root` until Ctrl+C (or SIGTERM). Raises RatuiError (RAT-WEB-*)
    when the options are refused or host:port cannot be listened on, before anything starts."""
    root = Path(root).resolve()
    options = options or WebOptions()
    token, context = check_options(options)
    check_address(options.host, options.port)
    loopback = is_loopback(options.host)

    def say(kind: str, text: str, **data: Any) -> None:
        if as_json:
            print(json.dumps({"event": kind, **data, "message": text}), flush=True)
        else:
            print(f"ratui web: {text}", file=sys.stderr if kind == "warning" else sys.stdout, flush=True)

    server = ConsoleServer(root, options, token=token,
                           out=lambda line: say("log", line.removeprefix("ratui web: "), message=line), tell=say)
    server.initialize_logging()
    entry: Path | None = None

    def serving(base: str) -> None:
        nonlocal entry
        url = f"{base}/?token={token}"
        if not loopback:
            say("warning", f"listening on {options.host}, not only this machine: anyone who can reach port "
                           f"{options.port} and has the token can run this project's pipelines"
                + ("" if context else "; the traffic (the token included) is NOT encrypted: give --certfile and "
                                      "--keyfile, or put ratui web behind a TLS proxy"),
                host=options.host, port=options.port, loopback=False, encrypted=context is not None)
        say("serving", f"serving {root} at {url} (Ctrl+C stops)", project=str(root), url=url, host=options.host,
            port=options.port, loopback=loopback, read_only=options.read_only, encrypted=context is not None,
            max_sessions=options.max_sessions, idle_minutes=options.idle_minutes, sessions=SESSIONS_NOTE)
        if not as_json:
            limits = (f"at most {options.max_sessions} at once"
                      + (f", each closed after {options.idle_minutes:g} min without a key" if options.idle_minutes
                         else ""))
            say("note", f"{SESSIONS_NOTE} ({limits})" + ("; every session is read-only" if options.read_only
                                                         else ""))
        log.info("serving %s at %s (read-only: %s)", root, base, options.read_only)  # the bare URL: no token
        entry = registry.register(root, url=url, host=options.host, port=options.port, read_only=options.read_only)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        interrupts = 0

        def interrupt() -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1:
                stop.set()
            else:
                server.kill_sessions()

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, interrupt)
        try:
            await server.run(stop, serving, context)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    began = time.monotonic()
    try:
        asyncio.run(main())
    finally:
        registry.unregister(entry)
    say("stopped", f"stopped after {format_duration((time.monotonic() - began) * 1000)}, {server.opened} "
                   f"session(s) served, {server.refused} request(s) refused", sessions=server.opened,
        refused=server.refused)
