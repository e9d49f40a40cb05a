"""Who can use `ratui web`: the real server, started through the installed command on 127.0.0.1, talked to with
aiohttp's client as a browser (or an attacker's page) would.

Without the token nothing is served and no console process starts; the token is traded for an HttpOnly,
SameSite=Strict cookie and leaves the address bar; a websocket from another Origin, or a request naming another
Host (DNS rebinding), is refused even with the cookie; every response carries the anti-framing, no-referrer and
no-store headers; the token reaches neither the log nor a console's environment. The tests that need no console
(everything refused) are quick, unit; the ones that open a console, which warms Spark up, are spark (tests/kinds.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import ssl
import stat
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.test_web import SCREEN_TIMEOUT, Tab, free_port, ratui_binary, wait_gone

START_TIMEOUT = 60
WS_HEADERS = {"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
              "Connection": "Upgrade", "Upgrade": "websocket"}


class Served:
    """A `ratui web --json` process and what it said when it started serving."""

    def __init__(self, project: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.out = project.parent / f"web-{self.port}.out"
        self.project = project
        with open(self.out, "w") as log:
            self.process = subprocess.Popen(
                [ratui_binary(), "web", "--project", str(project), "--port", str(self.port), "--json", *args],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + START_TIMEOUT
        self.serving: dict = {}
        while not self.serving:
            assert self.process.poll() is None, f"ratui web exited ({self.process.returncode}):\n{self.text()}"
            assert time.monotonic() < deadline, f"ratui web did not start within {START_TIMEOUT}s:\n{self.text()}"
            for event in self.events():
                if event.get("event") == "serving":
                    self.serving = event
            time.sleep(0.1)
        self.url = self.serving["url"]
        self.base, _, query = self.url.partition("/?")
        self.token = query.removeprefix("token=")
        self.origin = self.base

    def text(self) -> str:
        return self.out.read_text()

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.text().splitlines() if line.startswith("{")]

    def children(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def consoles(self) -> list[psutil.Process]:
        """The live session consoles (`ratui tui` processes) this server started."""
        found = []
        for process in self.children():
            try:
                if process.status() != psutil.STATUS_ZOMBIE and "tui" in process.cmdline():
                    found.append(process)
            except psutil.Error:  # gone meanwhile
                pass
        return found

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.process.wait(10)


@pytest.fixture
def served(sample_copy):
    started: list[Served] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Served:
        server = Served(sample_copy, *args, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def run(coroutine):
    return asyncio.run(coroutine)


async def fetch(url: str, *, cookies: dict | None = None, headers: dict | None = None, ssl_context=None):
    """(status, headers, body, cookies set) of one GET that does not follow redirects."""
    from aiohttp import ClientSession

    async with ClientSession(cookies=cookies) as session:
        async with session.get(url, headers=headers or {}, allow_redirects=False, ssl=ssl_context) as response:
            body = await response.text()
            return response.status, response.headers, body, {k: v for k, v in response.cookies.items()}


def test_without_the_token_nothing_is_served_and_no_console_starts(served):
    server = served()
    assert len(server.token) >= 40  # secrets.token_urlsafe(32)
    assert server.serving["url"] == f"http://127.0.0.1:{server.port}/?token={server.token}"

    async def attempts():
        status, headers, body, _ = await fetch(server.base + "/")
        assert status == 401 and "ratui web list" in body  # the page says how to get in
        for name, value in (("Content-Security-Policy", "frame-ancestors 'none'"), ("X-Frame-Options", "DENY"),
                            ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store")):
            assert headers.get(name) == value, name  # on a refusal as on the page
        status, *_ = await fetch(server.base + "/?token=" + "x" * 43)
        assert status == 403
        status, *_ = await fetch(server.base + "/ws", headers={**WS_HEADERS, "Origin": server.origin})
        assert status == 401  # the handshake is refused before any console starts
        status, *_ = await fetch(server.base + "/ws?token=wrong", headers={**WS_HEADERS, "Origin": server.origin})
        assert status == 403
        status, *_ = await fetch(server.base + "/static/js/textual.js")
        assert status == 401
        status, *_ = await fetch(server.base + "/download/anything")
        assert status == 401

    run(attempts())
    assert server.children() == []
    assert server.stop() == 0
    stopped = server.events()[-1]
    assert stopped["event"] == "stopped" and stopped["sessions"] == 0 and stopped["refused"] == 6


def test_the_token_becomes_a_strict_cookie_and_leaves_the_address_bar(served):
    server = served()

    async def browse():
        status, headers, _body, cookies = await fetch(f"{server.base}/?token={server.token}&fontsize=14")
        assert status == 302
        assert headers["Location"] == "/?fontsize=14"  # the token is gone from the URL the browser shows
        (cookie,) = cookies.values()
        assert cookie.key == f"ratui-web-{server.port}"
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
        assert not cookie["secure"]  # plain HTTP on loopback; with TLS it is Secure (test below)
        assert server.token not in cookie.value  # the cookie is derived from the token, not the token
        status, headers, page, _ = await fetch(server.base + "/?fontsize=14", cookies={cookie.key: cookie.value})
        assert status == 200 and 'class="textual-terminal"' in page
        assert headers["Content-Security-Policy"] == "frame-ancestors 'none'"
        assert headers["Referrer-Policy"] == "no-referrer" and headers["Cache-Control"] == "no-store"
        # a cookie of another server (another port) or a forged one does not open this one
        status, *_ = await fetch(server.base + "/", cookies={cookie.key: "0" * 64})
        assert status == 401
        # a script may send the token as a header instead
        status, *_ = await fetch(server.base + "/", headers={"Authorization": f"token {server.token}"})
        assert status == 200

    run(browse())
    assert server.children() == []
    server.stop()
    log = (server.project / ".ratui" / "logs" / "web.log").read_text()
    assert "GET /" in log and server.token not in log  # the access log keeps paths, never the query


def test_a_foreign_host_or_origin_is_refused_even_with_the_token(served):
    server = served("--allow-host", "ratui.internal")
    auth = {"Authorization": f"token {server.token}"}

    async def attacks():
        # DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser sends the attacker's Host
        for host in ("evil.example", f"evil.example:{server.port}", f"127.0.0.1:{server.port + 1}", "127.0.0.1"):
            status, _h, body, _ = await fetch(server.base + "/", headers={**auth, "Host": host})
            assert status == 403, host
            assert "host" in body.lower()
        for host in (f"localhost:{server.port}", f"[::1]:{server.port}", "ratui.internal", "RATUI.internal:443"):
            status, *_ = await fetch(server.base + "/", headers={**auth, "Host": host})
            assert status == 200, host
        # a page of another site opening the websocket with the user's credentials
        for origin in ("http://evil.example", "null", f"http://127.0.0.1:{server.port}.evil.example",
                       f"http://localhost:{server.port + 1}"):
            status, *_ = await fetch(server.base + "/ws", headers={**WS_HEADERS, **auth, "Origin": origin})
            assert status == 403, origin
        status, *_ = await fetch(server.base + "/ws", headers={**WS_HEADERS, **auth})  # no Origin at all
        assert status == 403

    run(attacks())
    assert server.children() == []  # nothing refused started a console


def test_the_token_from_the_environment_is_used_and_kept_from_the_consoles(served):
    token = "t" * 20 + "-environment-token"
    server = served(env={"RATUI_WEB_TOKEN": token})
    assert server.token == token
    server.stop()
    # (the session test below checks that a console's environment lacks it)


@pytest.mark.parametrize("args, code, words", [
    (("--host", "0.0.0.0"), "RAT-WEB-004", "--allow-remote"),
    (("--token", "short"), "RAT-WEB-005", "at least 16"),
    (("--token", "has a space in the middle"), "RAT-WEB-005", "characters"),
    (("--certfile", "cert.pem"), "RAT-WEB-006", "--keyfile"),
    (("--certfile", "missing.pem", "--keyfile", "missing.key"), "RAT-WEB-006", "missing.pem"),
    (("--allow-host", "http://x/y"), "RAT-WEB-007", "host name"),
])
def test_options_that_would_open_the_door_are_refused_before_anything_listens(sample_copy, args, code, words):
    port = free_port()
    proc = subprocess.run([ratui_binary(), "web", "--project", str(sample_copy), "--port", str(port), *args],
                          capture_output=True, text=True, timeout=60, cwd=sample_copy)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error[{code}]") and words in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert "short" not in proc.stderr.split("hint:")[0] or code != "RAT-WEB-005"  # the token is never echoed


def test_an_allowed_remote_host_warns_that_the_traffic_is_not_encrypted(served):
    server = served("--host", "0.0.0.0", "--allow-remote")
    warning = next(e for e in server.events() if e.get("event") == "warning")
    assert warning["encrypted"] is False and "NOT encrypted" in server.text()

    async def still_locked():
        assert server.base == f"http://{socket.gethostname()}:{server.port}"  # a name a browser can open
        status, *_ = await fetch(f"http://127.0.0.1:{server.port}/")
        assert status == 401

    run(still_locked())


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from datetime import datetime, timedelta, timezone

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=1))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_serves_https_with_a_secure_cookie(served, tmp_path):
    cert, key = _self_signed(tmp_path)
    server = served("--certfile", str(cert), "--keyfile", str(key))
    assert server.url.startswith(f"https://127.0.0.1:{server.port}/?token=")
    trust = ssl.create_default_context(cafile=str(cert))
    trust.check_hostname = False  # the certificate names localhost; the server prints 127.0.0.1

    async def browse():
        status, _h, _b, cookies = await fetch(f"{server.base}/?token={server.token}", ssl_context=trust)
        assert status == 302
        (cookie,) = cookies.values()
        assert cookie["secure"] and cookie["httponly"]
        plain = server.base.replace("https://", "http://")
        from aiohttp import ClientError

        with pytest.raises((ClientError, ConnectionError)):  # no plain HTTP on a TLS port
            await fetch(plain + "/")

    run(browse())


def test_web_list_shows_the_running_server_to_its_owner_only(served):
    server = served()
    entries = server.project / ".ratui" / "web"
    (entry,) = entries.glob("server-*.json")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(entries.stat().st_mode) == 0o700
    listed = subprocess.run([ratui_binary(), "web", "list", "--project", str(server.project)], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0
    assert listed.stdout.startswith(f"{server.url}  pid {server.process.pid}  since ")
    as_json = subprocess.run([ratui_binary(), "web", "list", "--project", str(server.project), "--json"],
                             capture_output=True, text=True, timeout=60)
    assert json.loads(as_json.stdout)["url"] == server.url
    server.stop()
    assert not list(entries.glob("server-*.json"))
    listed = subprocess.run([ratui_binary(), "web", "list", "--project", str(server.project)], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0 and listed.stdout.startswith("no ratui web server is running")


def test_web_list_forgets_a_server_that_was_killed(served):
    server = served()
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(10)
    entries = server.project / ".ratui" / "web"
    assert list(entries.glob("server-*.json"))  # a kill leaves its entry behind...
    listed = subprocess.run([ratui_binary(), "web", "list", "--project", str(server.project)], capture_output=True,
                            text=True, timeout=60)
    assert "no ratui web server is running" in listed.stdout  # ... and list sees it is gone
    assert not list(entries.glob("server-*.json"))


# ------------------------------------------------------------------------------------- with a console


async def _open_tab(session, server: Served, cookie: dict[str, str]) -> Tab:
    ws = await session.ws_connect(f"{server.base.replace('http', 'ws', 1)}/ws?width=120&height=40",
                                  headers={"Origin": server.origin})
    tab = Tab(ws)
    await tab.send("resize", {"width": 120, "height": 40})
    return tab


async def _cookie(server: Served) -> dict[str, str]:
    _status, _h, _b, cookies = await fetch(f"{server.base}/?token={server.token}")
    (cookie,) = cookies.values()
    return {cookie.key: cookie.value}


def test_a_read_only_server_with_one_session_refuses_changes_and_a_second_tab(served):
    from aiohttp import ClientSession, WSServerHandshakeError

    token = "r" * 24 + "-read-only-test"
    server = served("--read-only", "--max-sessions", "1", env={"RATUI_WEB_TOKEN": token})
    assert server.serving["read_only"] is True and server.serving["max_sessions"] == 1

    async def browse():
        cookie = await _cookie(server)
        async with ClientSession(cookies=cookie) as session:
            tab = await _open_tab(session, server, cookie)  # the cookie, from our own page: 101
            screen = await tab.until(lambda t: "raw_customers" in t and "read-only" in t, SCREEN_TIMEOUT,
                                     "the read-only console")
            assert "1 Pipelines" in screen
            consoles = server.consoles()
            assert len(consoles) == 1 and "--read-only" in consoles[0].cmdline()
            assert "RATUI_WEB_TOKEN" not in consoles[0].environ()  # the token stays with the server

            # the second tab: its page says why, its websocket is refused, no console starts
            status, _h, page, _ = await fetch(server.base + "/", cookies=cookie)
            assert status == 503 and "All 1 session(s) of this server are in use" in page
            with pytest.raises(WSServerHandshakeError) as refused:
                await session.ws_connect(f"{server.base.replace('http', 'ws', 1)}/ws",
                                         headers={"Origin": server.origin})
            assert refused.value.status == 503
            assert len(server.consoles()) == 1

            # r on the first pipeline: refused with a toast naming why; nothing runs
            mark = len(tab.stream)
            await tab.send("stdin", "r")
            await tab.until(lambda t: "read-only" in t and "RAT-ACC-001" in t, 30, "the refusal's toast",
                            since=mark)
            await tab.ws.close()
            wait_gone([p.pid for p in consoles], "the read-only console")

            # the slot is free again
            status, *_ = await fetch(server.base + "/", cookies=cookie)
            assert status == 200

    run(browse())
    assert server.stop() == 0
    runs = subprocess.run([ratui_binary(), "runs", "--project", str(server.project), "--json"], capture_output=True,
                          text=True, timeout=60)
    assert runs.returncode == 0 and runs.stdout.strip() == ""  # nothing ran
    text = server.text() + (server.project / ".ratui" / "logs" / "web.log").read_text()
    assert token not in text.replace(server.serving["url"], "")  # only the serving line holds it
    opened = [e for e in server.events() if e.get("event") == "session"]
    assert opened and opened[0]["origin"] == server.origin and opened[0]["remote"] == "127.0.0.1"


def test_an_idle_session_is_closed_and_its_console_ends(served):
    from aiohttp import ClientSession, WSMsgType

    server = served("--idle-timeout", "0.05")  # 3 seconds

    async def browse():
        cookie = await _cookie(server)
        async with ClientSession(cookies=cookie) as session:
            tab = await _open_tab(session, server, cookie)
            began = time.monotonic()
            deadline = began + 60
            while True:
                assert time.monotonic() < deadline, "the idle session was not closed"
                message = await tab.ws.receive(timeout=60)
                if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                    break
            assert tab.ws.close_code == 4000
            assert time.monotonic() - began >= 2.5

    run(browse())
    deadline = time.monotonic() + 30
    while server.consoles() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not server.consoles()
    assert re.search(r"idle for \S+: closed", (server.project / ".ratui" / "logs" / "web.log").read_text())
