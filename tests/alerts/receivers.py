"""Real servers on 127.0.0.1 that alerts reach: an aiohttp webhook receiver (what Slack, Teams or PagerDuty's
Events API would be) and an aiosmtpd SMTP server (what a mail relay would be), each in a thread of its own.

    with Webhook() as hook:            # hook.url("/ok"): 200; "/fail": 500; "/moved": 302 elsewhere; "/slow": 30 s
        ...
        hook.posts("/ok")              # the JSON bodies received on that path, in order
    with Mailbox() as box:             # box.port; box.messages: each message's text
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Webhook:
    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def posts(self, path: str) -> list[Any]:
        with self._lock:
            return [body for where, body in self.received if where == path]

    def wait_for(self, path: str, count: int, timeout: float = 60.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(found := self.posts(path)) < count:
            assert time.monotonic() < deadline, f"{count} post(s) to {path} not within {timeout:.0f} s: {found}"
            time.sleep(0.1)
        return found

    async def _handle(self, request):
        from aiohttp import web

        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            self.received.append((request.path, body))
        if request.path == "/fail":
            return web.Response(status=500, text="down")
        if request.path == "/moved":
            raise web.HTTPFound("http://elsewhere.example/hook")
        if request.path == "/slow":
            await asyncio.sleep(30)
        return web.json_response({"ok": True})

    async def _serve(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> "Webhook":
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._serve())

        threading.Thread(target=run, name="webhook", daemon=True).start()
        assert self._ready.wait(30), "the webhook receiver did not start"
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


class Mailbox:
    """aiosmtpd's SMTP server, no TLS and no login (Apprise's `mailto://...&mode=insecure` reaches it)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.messages: list[str] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's handler name
        self.messages.append(envelope.content.decode(errors="replace"))
        return "250 OK"

    def url(self, to: str = "ops@example.com") -> str:
        return f"mailto://127.0.0.1:{self.port}?from=ratui@example.com&to={to}&mode=insecure"

    def wait_for(self, count: int, timeout: float = 60.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count:
            assert time.monotonic() < deadline, f"{count} mail(s) not within {timeout:.0f} s: {self.messages}"
            time.sleep(0.1)
        return list(self.messages)

    def __enter__(self) -> "Mailbox":
        from aiosmtpd.controller import Controller

        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._controller.stop()
