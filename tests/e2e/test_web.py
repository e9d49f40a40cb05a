"""End to end: `ratui web` through the installed command, talked to as a browser talks to it.

The server is started on a copy of the sample project and a free port; the test fetches the page, opens the
websocket the page names, sends what textual.js sends (the size in the URL, a resize, a ping, keys), reads the
console's screen out of the terminal stream, and checks that closing a tab and stopping the server leave no
console (and no Spark JVM) behind. Plus the bad inputs, black-box: a port in use, a port out of range, a folder
that is not a project (quick: no console, so no Spark starts: unit in tests/kinds.py, the console's test spark).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

START_TIMEOUT = 60  # the server answering HTTP
SCREEN_TIMEOUT = 90  # a console drawn (a session starts a Python process; its Spark warms up beside it)
GONE_TIMEOUT = 30  # a session's console (and its JVM) gone once its tab or the server closed

# what xterm.js interprets and the test does not need to: CSI and OSC sequences, charset and keypad switches
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def ratui_binary() -> str:
    beside = Path(sys.executable).parent / "ratui"  # the install under test, even if another is on PATH
    found = str(beside) if beside.exists() else shutil.which("ratui")
    assert found, "the ratui command is not installed"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(project: Path, port: int, out: Path) -> subprocess.Popen:
    log = open(out, "w")
    try:
        # its own process group: if the test fails half-way, `finally` can still end the server and its sessions
        return subprocess.Popen([ratui_binary(), "web", "--project", str(project), "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(server.pid, signal.SIGKILL)  # whatever is left of the group: sessions, JVMs
    except ProcessLookupError:
        pass
    server.wait(10)


def wait_for_page(server: subprocess.Popen, out: Path) -> tuple[str, str, dict[str, str]]:
    """Open the URL the server printed (with its token), as a browser does: the token is traded for a cookie
    and the browser is sent to the bare page. Returns (the URL printed, the page, the cookie)."""
    import http.cookiejar

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        assert server.poll() is None, f"ratui web exited ({server.returncode}):\n{out.read_text()}"
        printed = re.search(r"serving .* at (\S+) \(Ctrl\+C stops\)", out.read_text())
        if printed:
            url = printed.group(1)
            jar = http.cookiejar.CookieJar()
            browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            try:
                with browser.open(url, timeout=5) as response:
                    assert response.status == 200
                    assert "token" not in response.url  # redirected to the bare URL
                    return url, response.read().decode("utf-8"), {c.name: c.value for c in jar}
            except OSError:
                pass
        assert time.monotonic() < deadline, f"no page within {START_TIMEOUT}s:\n{out.read_text()}"
        time.sleep(0.3)


def alive(pids: list[int]) -> list[int]:
    """The pids still running (a zombie has ended: only its parent has not collected it yet)."""
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    return left


def wait_gone(pids: list[int], what: str) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT
    while alive(pids):
        assert time.monotonic() < deadline, f"{what}: still running after {GONE_TIMEOUT}s: " + ", ".join(
            f"{pid} {' '.join(psutil.Process(pid).cmdline())[:120]}" for pid in alive(pids))
        time.sleep(0.2)


def in_group(pgid: int) -> list[str]:
    """Live processes of the server's process group: its sessions' consoles and JVMs, even once orphaned."""
    found = []
    for process in psutil.process_iter(["pid", "name", "status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(f"{process.pid} {process.info['name']}")
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


class Tab:
    """One browser tab's websocket: what textual.js sends, and the screen text it would draw."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.stream = ""  # everything the console wrote, escape sequences included
        self.texts: list[list] = []  # the JSON messages (pong, open_url, ...)

    async def send(self, *envelope) -> None:
        await self.ws.send_str(json.dumps(list(envelope)))

    def text(self, since: int = 0) -> str:
        return ANSI.sub("", self.stream[since:])

    async def until(self, predicate, timeout: float, what: str, since: int = 0) -> str:
        from aiohttp import WSMsgType

        deadline = time.monotonic() + timeout
        while not predicate(self.text(since)):
            left = deadline - time.monotonic()
            assert left > 0, f"{what} not seen within {timeout:.0f}s; the screen's text:\n{self.text(since)[-3000:]}"
            try:
                message = await self.ws.receive(timeout=min(left, 1.0))
            except asyncio.TimeoutError:
                continue
            if message.type == WSMsgType.BINARY:
                self.stream += message.data.decode("utf-8", "replace")
            elif message.type == WSMsgType.TEXT:
                self.texts.append(json.loads(message.data))
            else:
                raise AssertionError(f"the websocket closed ({message.type}) before {what}:\n{self.text()[-3000:]}")
        return self.text(since)

    async def until_closed(self, timeout: float) -> None:
        from aiohttp import WSMsgType

        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = await self.ws.receive(timeout=min(left, 1.0))
            except asyncio.TimeoutError:
                continue
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                return
        raise AssertionError(f"the server did not close the websocket within {timeout:.0f}s")


async def open_console(session, ws_url: str) -> Tab:
    origin = "http" + ws_url[len("ws"):].split("/ws", 1)[0]  # the page's own origin, as a browser sends it
    ws = await session.ws_connect(f"{ws_url}?width=120&height=40", headers={"Origin": origin})
    tab = Tab(ws)
    await tab.send("resize", {"width": 120, "height": 40})  # as textual.js does once the socket is open
    await tab.send("ping", "1")
    return tab


def test_web_serves_the_console_to_a_browser_and_leaves_nothing_behind(sample_copy: Path, tmp_path: Path):
    from aiohttp import ClientSession

    port = free_port()
    out = tmp_path / "server.out"
    began = time.monotonic()
    server = start_server(sample_copy, port, out)
    sessions: list[int] = []
    try:
        url, page, cookie = wait_for_page(server, out)
        served_in = time.monotonic() - began
        # textual-serve's page: its terminal script, and the websocket it connects to, on this server
        assert "js/textual.js" in page and 'class="textual-terminal"' in page
        ws_url = re.search(r'data-session-websocket-url="([^"]+)"', page).group(1)
        assert ws_url == f"ws://127.0.0.1:{port}/ws"
        lines = out.read_text().splitlines()
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        assert lines[0] == f"ratui web: serving {sample_copy.resolve()} at {url} (Ctrl+C stops)"
        assert "own Spark" in lines[1]

        async def browse() -> None:
            async with ClientSession(cookies=cookie) as session:
                # a tab: the console draws the project's pipelines; 2 opens Runs; closing the tab ends the console
                tab = await open_console(session, ws_url)
                screen = await tab.until(lambda t: "raw_customers" in t and "clean_orders" in t, SCREEN_TIMEOUT,
                                         "the sample's pipelines")
                assert "1 Pipelines" in screen and "2 Runs" in screen
                assert "R Re-run" not in screen  # the Runs screen's footer key, not the Pipelines screen's
                await tab.until(lambda t: ["pong", "1"] in tab.texts, 10, "the pong")
                children = descendants(server.pid)
                consoles = [p for p in children if "tui" in p.cmdline()]
                assert len(consoles) == 1, [p.cmdline() for p in children]
                # the session's own Spark: the console warms up a JVM of its own after its first paint
                deadline = time.monotonic() + SCREEN_TIMEOUT
                while not any(p.name() == "java" for p in descendants(consoles[0].pid)):
                    assert time.monotonic() < deadline, "the session's console started no Spark JVM"
                    await asyncio.sleep(0.3)
                children = descendants(server.pid)
                server_python = psutil.Process(server.pid).cmdline()[0]  # the console runs on the server's Python
                assert consoles[0].cmdline()[:5] == [server_python, "-m", "ratui", "tui", "--project"]
                assert consoles[0].cmdline()[5] == str(sample_copy.resolve())
                sessions.extend(p.pid for p in children)

                mark = len(tab.stream)
                await tab.send("stdin", "2")
                await tab.until(lambda t: "R Re-run" in t and "/ Filter" in t, 30, "the Runs screen", since=mark)
                await tab.ws.close()
                wait_gone([p.pid for p in children], "the closed tab's console")
                assert server.poll() is None, "closing a tab stopped the server"

                # a second tab, open while the server stops: Ctrl+C ends its console too
                tab = await open_console(session, ws_url)
                await tab.until(lambda t: "raw_customers" in t, SCREEN_TIMEOUT, "the second tab's console")
                children = descendants(server.pid)
                assert [p for p in children if "tui" in p.cmdline()], [p.cmdline() for p in children]
                sessions.extend(p.pid for p in children)
                stopping = time.monotonic()
                server.send_signal(signal.SIGINT)
                await tab.until_closed(30)  # reading on, as a browser does: it answers the server's close
                code = await asyncio.get_running_loop().run_in_executor(None, server.wait, 30)
                print(f"\nserver answered HTTP in {served_in:.1f}s; Ctrl+C with a tab open stopped it in "
                      f"{time.monotonic() - stopping:.1f}s")
                assert code == 0, out.read_text()

        asyncio.run(browse())
        wait_gone(sessions, "the consoles after Ctrl+C")
        text = out.read_text()
        assert text.splitlines()[-1].startswith("ratui web: stopped after ") and "2 session(s)" in text
        assert "Traceback" not in text
        # a console's JVM may still have been starting when Ctrl+C came (it starts after the first paint, so it
        # was not among the processes listed above): it ends on its own once it sees its console gone
        deadline = time.monotonic() + GONE_TIMEOUT
        while in_group(server.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not in_group(server.pid), "left behind: " + ", ".join(in_group(server.pid))
    finally:
        stop_server(server)
    assert not alive(sessions)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ratui_binary(), "web", *args], capture_output=True, text=True, timeout=60)


def test_a_port_in_use_is_a_coded_error(sample_copy: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("--project", str(sample_copy), "--port", str(port))
        assert proc.returncode == 2
        assert proc.stderr.startswith(f"error[RAT-WEB-001] port {port} on 127.0.0.1 is already in use")
        assert "--port" in proc.stderr and "Traceback" not in proc.stderr
        assert proc.stdout == ""  # nothing claimed to be served

        proc = run_cli("--project", str(sample_copy), "--port", str(port), "--json")
        assert proc.returncode == 2
        assert json.loads(proc.stdout)["error"]["code"] == "RAT-WEB-001"


@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_a_port_out_of_range_is_a_coded_error(sample_copy: Path, port: str):
    proc = run_cli("--project", str(sample_copy), "--port", port)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error[RAT-WEB-002] port {port} is out of range"), proc.stderr


def test_a_folder_that_is_not_a_project_is_the_same_error_as_tui(tmp_path: Path):
    web = run_cli("--project", str(tmp_path), "--port", str(free_port()))
    tui = subprocess.run([ratui_binary(), "tui", "--project", str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert web.returncode == tui.returncode == 2
    assert web.stderr.startswith("error[RAT-PRJ-005]")
    assert web.stderr == tui.stderr


def test_only_loopback_addresses_count_as_this_machine_only():
    from ratui.web import is_loopback, url_for

    assert all(is_loopback(host) for host in ("127.0.0.1", "localhost", "::1"))
    # every interface: the server warns that others can reach it
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::"))
    assert url_for("::1", 8000) == "http://[::1]:8000"
    assert url_for("0.0.0.0", 8000) == f"http://{socket.gethostname()}:8000"  # a browser cannot open 0.0.0.0
