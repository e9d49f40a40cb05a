"""`ratui web`: the console in a browser, served by textual-serve.

textual-serve serves a page whose JavaScript terminal talks to the server over a websocket; for each websocket
(each browser tab) the server starts one `ratui tui --project DIR` process and relays its screen and keys. So
every session is a whole console with its own engine and its own Spark (a JVM in local mode): two tabs are two
Sparks. The server binds 127.0.0.1 unless another host is asked for: textual-serve has no authentication, and
whoever reaches the port can run the project's pipelines.

What the terminal shows is ratui's own lines; textual-serve's and aiohttp's logging and each session's stderr go
to .ratui/logs/web.log.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import logging
import shlex
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from ratui.engine.errors import RatuiError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
SESSION_STOP_SECONDS = 10.0  # a session's console gets this long to quit (its Spark stops with it) before a kill
CLOSE_SECONDS = 3.0  # a browser that does not answer the websocket's close holds nothing up longer than this
LOG_NAME = "web.log"
SESSIONS_NOTE = ("each browser tab starts its own console process with its own Spark (a JVM: several hundred MB "
                 "and some seconds to start); close the tabs you do not use")

log = logging.getLogger("ratui.web")


def session_command(root: Path) -> str:
    """The shell command textual-serve runs per session: this Python's ratui on the project. `exec` keeps no
    shell between the server and the console (stopping the session stops the console itself); stderr goes to
    the log, never over the server's terminal."""
    console = shlex.join([sys.executable, "-m", "ratui", "tui", "--project", str(root)])
    return f"exec {console} 2>>{shlex.quote(str(log_path(root)))}"


def log_path(root: Path) -> Path:
    return root / ".ratui" / "logs" / LOG_NAME


def is_loopback(host: str) -> bool:
    """True when every address `host` names is this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {str(info[4][0]) for info in infos}
    try:
        return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
    except ValueError:
        return False


def url_for(host: str, port: int) -> str:
    """The address to give a browser: a wildcard host (every interface) is shown as this machine's name."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def check_address(host: str, port: int) -> None:
    """Raise a coded error unless the server can listen on host:port: checked before anything starts."""
    if not 1 <= port <= 65535:
        raise RatuiError("RAT-WEB-002", f"port {port} is out of range (1-65535)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise RatuiError("RAT-WEB-003", f"host '{host}' cannot be resolved: {exc}") from None
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: TIME_WAIT is no clash
            try:
                probe.bind(address)
            except OSError as exc:
                raise _bind_error(host, port, exc) from None


def _bind_error(host: str, port: int, exc: OSError) -> RatuiError:
    if exc.errno == errno.EADDRINUSE:
        return RatuiError("RAT-WEB-001", f"port {port} on {host} is already in use")
    if exc.errno == errno.EACCES:
        return RatuiError("RAT-WEB-002", f"port {port} needs privileges this user lacks (ports below 1024)")
    return RatuiError("RAT-WEB-003", f"cannot listen on {host}:{port}: {exc.strerror or exc}")


class ConsoleServer(Server):
    """textual-serve's Server for one ratui project: our own start and stop, quiet logging, page URLs taken from
    the request (so a server bound to 0.0.0.0 hands the browser a websocket address it can reach), and every
    session tracked so that stopping the server stops every console it started."""

    def __init__(self, root: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 out: Callable[[str], None] | None = None) -> None:
        self.root = Path(root).resolve()
        super().__init__(session_command(self.root), host=host, port=port, title=f"ratui · {self.root.name}")
        self.out = out or (lambda line: print(line, flush=True))
        self.sessions: dict[AppService, web.WebSocketResponse] = {}
        self.opened = 0

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

    # ----------------------------------------------------------------------------------------- pages

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        base = f"{request.scheme}://{request.host}"
        static = base + str(request.app.router["static"].url_for(filename="/")).rstrip("/") + "/"
        websocket = "ws" + base[len("http"):] + str(request.app.router["websocket"].url_for())
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": websocket,
            "config": {"static": {"url": static}},
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's handler, with the session recorded while it lives."""
        websocket = web.WebSocketResponse(heartbeat=15, timeout=CLOSE_SECONDS)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        service: AppService | None = None
        try:
            await websocket.prepare(request)

            async def close() -> None:  # the console exited (Ctrl+Q in the page): the tab's websocket closes
                await websocket.close()

            service = AppService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=close, download_manager=self.download_manager, debug=self.debug)
            self.sessions[service] = websocket
            self.opened += 1
            await service.start(width, height)
            log.info("session %s opened from %s (console pid %s)", service.app_service_id[:8], request.remote,
                     _pid(service))
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # noqa: BLE001 - one broken session must not stop the server
            log.exception(error)
        finally:
            if service is not None:
                await self._stop_session(service)
                log.info("session %s closed", service.app_service_id[:8])
        return websocket

    async def _stop_session(self, service: AppService) -> None:
        """Ask the console to quit; kill it if it has not within SESSION_STOP_SECONDS."""
        self.sessions.pop(service, None)
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

    async def run(self, stop: asyncio.Event, on_serving: Callable[[str], None]) -> None:
        """Listen until `stop` is set, then stop every session and the server."""
        app = await self._make_app()
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=5.0,
                               access_log=logging.getLogger("aiohttp.access"))
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            try:
                await site.start()
            except OSError as exc:  # taken between our check and now
                raise _bind_error(self.host, self.port, exc) from None
            on_serving(url_for(self.host, self.port))
            await stop.wait()
        finally:
            await runner.cleanup()


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


def serve(root: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
          as_json: bool = False) -> None:
    """Serve the console for the project at `root` until Ctrl+C (or SIGTERM). Raises RatuiError (RAT-WEB-*)
    when host:port cannot be listened on, before anything starts."""
    root = Path(root).resolve()
    check_address(host, port)
    loopback = is_loopback(host)

    def say(kind: str, text: str, **data: Any) -> None:
        if as_json:
            print(json.dumps({"event": kind, **data}), flush=True)
        else:
            print(f"ratui web: {text}", file=sys.stderr if kind == "warning" else sys.stdout, flush=True)

    server = ConsoleServer(root, host, port, out=lambda line: say("log", line.removeprefix("ratui web: "),
                                                                   message=line))
    server.initialize_logging()

    def serving(url: str) -> None:
        if not loopback:
            say("warning", f"listening on {host}, not only this machine: anyone who can reach port {port} can "
                           "run this project's pipelines (ratui web has no login); use --host 127.0.0.1 unless "
                           "that is what you want", host=host, port=port, loopback=False)
        say("serving", f"serving {root} at {url} (Ctrl+C stops)", project=str(root), url=url, host=host,
            port=port, loopback=loopback, command=server.command, sessions=SESSIONS_NOTE)
        if not as_json:
            say("note", SESSIONS_NOTE)
        log.info("serving %s at %s", root, url)

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

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, interrupt)
        try:
            await server.run(stop, serving)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    began = time.monotonic()
    asyncio.run(main())
    say("stopped", f"stopped after {_uptime(time.monotonic() - began)}, {server.opened} session(s) served",
        sessions=server.opened)


def _uptime(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
