"""`ratui serve` started as a real process (`python -m ratui serve --json`), and the sample project it serves.

`rest_sample` runs the bundled sample once (one Engine run of its pipelines on the session's Spark) for every module of
this folder; each module starts its own server on it (`served`) and uses refs of its own, so the modules do not depend
on each other's order. `Served.get/post/...` send requests with the token and check every response against our
own statement of the Iceberg REST response schemas (openapi.py; the published OpenAPI document is not vendored
here); `Served.pyiceberg(ref)` is PyIceberg's RestCatalog on a ref, its responses checked the same way.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest
import requests

from tests.conftest import SAMPLE
from tests.rest import openapi
from tests.servers import free_port

START_SECONDS = 60.0  # the server answers in about a second; a loaded 2-core machine gets slack


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    token: str
    proc: subprocess.Popen
    root: Path

    def url(self, ref: str = "main") -> str:
        return f"{self.base}/iceberg/{quote(ref, safe='@')}"

    def request(self, method: str, ref: str, path: str, *, token: str | None = None, check: bool = True,
                headers: dict[str, str] | None = None, **kwargs: Any) -> requests.Response:
        """`path` after /v1 (e.g. "/namespaces"); the token unless `token` says otherwise ("" sends none)."""
        token = self.token if token is None else token
        sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
        response = requests.request(method, f"{self.url(ref)}/v1{path}", headers=sent, timeout=60, **kwargs)
        if check:
            check_response(response)
        return response

    def pyiceberg(self, ref: str):
        from pyiceberg.catalog.rest import RestCatalog

        catalog = RestCatalog(f"ratui-{ref}", uri=self.url(ref), token=self.token)
        catalog._session.hooks["response"].append(lambda response, *a, **k: check_response(response))
        return catalog


def check_response(response: requests.Response) -> None:
    """The response's body matches its route's response schema for its status (openapi.py); errors have ratui's
    code."""
    body = response.json() if response.content else None
    openapi.check(response.request.method, response.request.path_url, response.status_code, body)
    if response.status_code >= 400 and body is not None:
        assert body["error"]["message"].startswith("RAT-"), body
        assert "Traceback" not in response.text


@contextmanager
def serve(root: Path, *options: str, token: str | None = None) -> Iterator[Served]:
    """`python -m ratui serve` on `root` until the block ends, then SIGTERM: it must stop cleanly."""
    token = token or "rest-test-" + secrets.token_urlsafe(16)
    port = free_port()
    env = {**os.environ, "RATUI_SERVE_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ratui", "serve", "--project", str(root), "--port", str(port),
                             "--json", *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        event = _first_event(proc)
        assert event.get("event") == "serving", event
        assert event["url"] == f"http://127.0.0.1:{port}/iceberg/main"
        served = Served(event["base"], token, proc, root)
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"ratui serve did not stop on SIGTERM\n{err[-2000:]}")
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and events[-1]["event"] == "stopped", (proc.returncode, out[-1000:], err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    log = (root / ".ratui" / "logs" / "serve.log").read_text()
    assert token not in log and token not in err  # the token is only ever in the serving line


def _first_event(proc: subprocess.Popen) -> dict:
    deadline = time.monotonic() + START_SECONDS
    watch = selectors.DefaultSelector()  # epoll: select() refuses a descriptor above 1023, which a long run reaches
    watch.register(proc.stdout, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        if watch.select(1.0):
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                return json.loads(line)
    proc.kill()
    out, err = proc.communicate()
    pytest.fail(f"ratui serve did not start (exit {proc.returncode})\n{out[-1000:]}\n{err[-2000:]}")


@pytest.fixture(scope="session")
def rest_sample(spark, tmp_path_factory) -> dict:
    """The bundled sample run once, in this process: {"root": the project, "keys": its tables}."""
    from ratui.engine.facade.engine import Engine

    root = tmp_path_factory.mktemp("rest-sample") / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    # the Python pipeline in ratui's own process: its confinement is tests/engine/isolation's subject, not this
    # folder's, and a confined child costs a data server's JVM start
    with open(root / "ratui.yaml", "a") as settings:
        settings.write("python:\n  isolation: none\n")
    engine = Engine.open(root)
    try:
        keys = engine.compile().select([])
        results = engine.run(keys)
        failed = [(r.pipeline, r.status, r.error) for r in results if r.status != "success"]
        assert not failed, failed
    finally:
        engine.close()
    return {"root": root, "keys": sorted(keys)}


@pytest.fixture(scope="session")
def sample_engine(rest_sample):
    """One Engine on the sample for the tests' own reads (`ratui query`'s code: Spark over the ref's tables)."""
    from ratui.engine.facade.engine import Engine

    engine = Engine.open(rest_sample["root"])
    yield engine
    engine.close()


@pytest.fixture
def empty_project(tmp_path) -> Path:
    """A project with no tables yet (no Spark needed to serve it)."""
    root = tmp_path / "empty"
    root.mkdir()
    (root / "ratui.yaml").write_text("namespace: demo\n")
    return root
