"""`ratui web` in a real browser: a screenshot of the console drawn by headless Chromium, and how long it took.

    python benchmarks/web_screenshot.py                      # PNG in a temporary folder; its path is printed
    python benchmarks/web_screenshot.py --out shot.png --size 1280x900 --key 2

Starts `ratui web` (this Python's ratui) on a temporary copy of the sample project and a free port on 127.0.0.1,
then drives headless Chromium through its DevTools protocol: a screenshot taken at page load would show only the
page's intro, because the terminal is drawn by JavaScript (xterm.js) once the websocket is open and the session's
console has started. So the script records what the page's websocket receives and waits until the console has
drawn the sample's pipelines (raw_customers, clean_orders), lets xterm.js paint, and then takes the screenshot.
Figures, from the launch of `ratui web`:

    server      `ratui web` answers HTTP
    first byte  the page received the console's first bytes (textual.js shows the terminal)
    drawn       the console has drawn the project's pipelines in the page

Without Chromium it says how to install it and exits 0. It never asserts a timing: a measurement, run by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_project"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DRAWN = ("raw_customers", "clean_orders")  # on the Pipelines screen once the console has drawn the project
TIMEOUT = 90.0

# Before the page's own scripts: keep what the websocket brings (the console's terminal output) where the script
# can read it, so "drawn" means the console's text reached xterm.js, not a guess after a fixed sleep.
RECORD_WEBSOCKET = """
(() => {
  const Native = window.WebSocket;
  const decoder = new TextDecoder();
  window.__ratui = {text: "", bytes: 0};
  function Recording(url, protocols) {
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    ws.addEventListener("message", (event) => {
      if (typeof event.data !== "string") {
        const chunk = decoder.decode(new Uint8Array(event.data), {stream: true});
        window.__ratui.bytes += event.data.byteLength;
        window.__ratui.text = (window.__ratui.text + chunk).slice(-400000);
      }
    });
    return ws;
  }
  Recording.prototype = Native.prototype;
  for (const name of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) Recording[name] = Native[name];
  window.WebSocket = Recording;
})();
"""


def find_browser() -> str | None:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_sample(parent: Path) -> Path:
    dest = parent / "sample"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def wait_http(process: subprocess.Popen, log: Path, timeout: float) -> str:
    """The URL (with its token) ratui web printed once it serves."""
    import re

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            sys.exit(f"ratui web exited ({process.returncode}):\n{log.read_text()}")
        printed = re.search(r"serving .* at (\S+) \(Ctrl\+C stops\)", log.read_text())
        if printed:
            return printed.group(1)
        if time.monotonic() > deadline:
            sys.exit(f"ratui web did not serve within {timeout:.0f}s:\n{log.read_text()}")
        time.sleep(0.1)


def stop(process: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGINT (Ctrl+C) first, as a user stops it; the whole process group if that did not end it."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait(10)


def devtools_port(profile: Path, browser: subprocess.Popen, timeout: float = 30.0) -> int:
    """Chromium writes the port it chose (--remote-debugging-port=0) to DevToolsActivePort in its profile."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while not (marker.exists() and marker.read_text().strip()):
        if browser.poll() is not None:
            sys.exit(f"Chromium exited ({browser.returncode}) before opening its DevTools port")
        if time.monotonic() > deadline:
            sys.exit("Chromium did not open its DevTools port")
        time.sleep(0.05)
    return int(marker.read_text().splitlines()[0])


class DevTools:
    """The few DevTools protocol calls this needs, over one page target's websocket."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, **params):
        from aiohttp import WSMsgType

        self.next_id += 1
        ident = self.next_id
        await self.ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = await self.ws.receive(timeout=60)
            if message.type != WSMsgType.TEXT:
                raise RuntimeError(f"DevTools connection ended ({message.type})")
            data = json.loads(message.data)
            if data.get("id") == ident:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")


async def screenshot(devtools_url: str, page_url: str, width: int, height: int, key: str | None, t0: float,
                     timings: dict[str, float]) -> bytes:
    from aiohttp import ClientSession

    async with ClientSession() as session:
        async with session.put(f"{devtools_url}/json/new?about:blank") as response:  # a fresh page target
            target = await response.json()
        async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            tools = DevTools(ws)
            await tools.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                             mobile=False)
            await tools.call("Page.enable")
            await tools.call("Page.addScriptToEvaluateOnNewDocument", source=RECORD_WEBSOCKET)
            await tools.call("Page.navigate", url=page_url)
            drawn = " && ".join(f"window.__ratui.text.includes({json.dumps(word)})" for word in DRAWN)
            deadline = time.monotonic() + TIMEOUT
            while True:
                state = await tools.evaluate(
                    "window.__ratui ? {first: document.body && document.body.classList.contains('-first-byte'), "
                    f"drawn: {drawn}, closed: !!document.querySelector('body.-closed')}} : null") or {}
                now = time.perf_counter() - t0
                if state.get("first") and "first byte" not in timings:
                    timings["first byte"] = now
                if state.get("drawn"):
                    timings["drawn"] = now
                    break
                if state.get("closed"):
                    raise RuntimeError("the page's websocket closed before the console drew")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the console was not drawn within {TIMEOUT:.0f}s")
                await asyncio.sleep(0.05)
            if key:  # a key as the browser sends it: xterm.js turns the key press into the terminal's input
                await tools.evaluate("window.__ratui.text = ''")
                await tools.call("Input.dispatchKeyEvent", type="keyDown", text=key, key=key)
                await tools.call("Input.dispatchKeyEvent", type="keyUp", key=key)
                deadline = time.monotonic() + 30
                while len(await tools.evaluate("window.__ratui.text") or "") < 1000:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the console did not answer the key {key!r}")
                    await asyncio.sleep(0.05)
                timings[f"after key {key}"] = time.perf_counter() - t0
            # xterm.js paints on animation frames after its write callbacks; the terminal fades in over 0.3 s
            await asyncio.sleep(1.0)
            shot = await tools.call("Page.captureScreenshot", format="png")
            await tools.call("Page.navigate", url="about:blank")  # closes the websocket: the session ends
            return base64.b64decode(shot["data"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default: a temporary folder)")
    parser.add_argument("--size", default="1280x900", help="browser viewport WIDTHxHEIGHT (default 1280x900)")
    parser.add_argument("--key", default=None, help="a key to press once the console is drawn (e.g. 2: Runs)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))

    browser_path = find_browser()
    if browser_path is None:
        print("Chromium is not installed: this benchmark needs a headless browser.\n"
              "  Debian/Ubuntu: sudo apt-get install chromium\n"
              "  (or any Chrome or Chromium on PATH as chromium, chromium-browser or google-chrome)")
        return 0

    work = Path(tempfile.mkdtemp(prefix="ratui-web-shot-"))
    out = args.out or work / "web_screenshot.png"
    project = copy_sample(work)
    port = free_port()
    server_log = work / "server.out"
    timings: dict[str, float] = {}
    server = browser = None
    try:
        t0 = time.perf_counter()
        with open(server_log, "w") as log:
            server = subprocess.Popen([sys.executable, "-m", "ratui", "web", "--project", str(project), "--port",
                                       str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = wait_http(server, server_log, 60)  # the page's URL with its token: the browser trades it for a cookie
        timings["server"] = time.perf_counter() - t0

        profile = work / "chromium-profile"
        command = [browser_path, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                   "--no-default-browser-check", f"--window-size={width},{height}", f"--user-data-dir={profile}",
                   "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        browser = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        devtools = f"http://127.0.0.1:{devtools_port(profile, browser)}"
        png = asyncio.run(screenshot(devtools, url, width, height, args.key, t0, timings))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png)
    finally:
        if browser is not None:
            stop(browser, grace=5)
        if server is not None:
            stop(server)
        for leftover in (project, work / "chromium-profile"):  # the PNG and the server's log stay
            shutil.rmtree(leftover, ignore_errors=True)

    print(f"screenshot: {out} ({len(png) / 1024:.0f} KB, {width}x{height}, {Path(browser_path).name})")
    for name, seconds in timings.items():
        print(f"  {name:<12} {seconds:6.2f} s from the launch of ratui web")
    print(f"  server log: {server_log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
