"""Who may use `ratui serve`, and its start and stop: the token, Host and Origin rules of every ratui endpoint, in
the Iceberg REST error shape; the options it refuses before it listens; the in-process server object the console
will toggle. No Spark: the project has no tables."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
import requests

from tests.rest import openapi
from tests.rest.conftest import check_response, serve
from tests.servers import free_port


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("door") / "p"
    root.mkdir()
    (root / "ratui.yaml").write_text("namespace: demo\n")
    with serve(root) as server:
        yield server


def _error(response: requests.Response, status: int, code: str, kind: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (status, kind)
    assert error["message"].startswith(code + ": "), error


def test_config_lists_what_is_served_and_the_token_opens_the_catalog(served):
    response = served.request("GET", "main", "/config")
    assert response.status_code == 200
    assert "POST /v1/{prefix}/transactions/commit" in response.json()["endpoints"]
    assert set(response.json()["endpoints"]) == openapi.served_endpoints()
    # each a route of the interface whose response shapes openapi.py states, in the form clients parse
    assert set(response.json()["endpoints"]) <= openapi.routes_of_the_interface()
    assert all(openapi.ENDPOINT.fullmatch(endpoint) for endpoint in response.json()["endpoints"])
    assert served.request("GET", "main", "/namespaces").json() == {"namespaces": []}


def test_no_token_wrong_token_bad_host_and_a_foreign_origin_are_refused(served):
    _error(served.request("GET", "main", "/namespaces", token=""), 401, "RAT-REST-011", "NotAuthorizedException")
    _error(served.request("GET", "main", "/namespaces", token="not-the-token-of-this-server"), 403, "RAT-REST-011",
           "ForbiddenException")
    _error(served.request("GET", "main", "/namespaces", headers={"Host": "rebound.example:80"}), 403, "RAT-REST-012",
           "ForbiddenException")
    _error(served.request("GET", "main", "/namespaces", headers={"Origin": "https://evil.example"}), 403,
           "RAT-REST-012", "ForbiddenException")
    # a page of this very server may (the rule browsers need); no Iceberg client sends an Origin at all
    own = served.base.removeprefix("http://")
    assert served.request("GET", "main", "/namespaces", headers={"Origin": f"http://{own}"}).status_code == 200
    # no token also outside the catalog's routes: nothing answers without it
    response = requests.get(f"{served.base}/", timeout=30)
    assert response.status_code == 401 and response.json()["error"]["message"].startswith("RAT-REST-011")


def test_an_encoded_ref_is_decoded_and_an_unknown_one_is_a_404_naming_it(served):
    # Served.url sends the ref URL-encoded: /iceberg/dev%2Falice/v1/...
    response = served.request("GET", "dev/alice", "/namespaces")
    _error(response, 404, "RAT-CAT-002", "NoSuchNamespaceException")
    assert "'dev/alice'" in response.json()["error"]["message"]
    _error(served.request("GET", "dev/alice", "/namespaces/demo/tables/t"), 404, "RAT-CAT-002",
           "NoSuchTableException")


def _serve_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "ratui", "serve", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_options_are_refused_before_anything_listens(served):
    root = str(served.root)
    cases = [
        (("--host", "0.0.0.0"), {}, "RAT-REST-018"),
        (("--token", "short"), {}, "RAT-REST-019"),
        ((), {"RATUI_SERVE_TOKEN": "has spaces in it, far too many"}, "RAT-REST-019"),
        (("--allow-host", "http://x/y"), {}, "RAT-REST-020"),
        (("--port", served.base.rsplit(":", 1)[1]), {}, "RAT-REST-001"),  # the module's server has it
    ]
    for args, env, code in cases:
        proc = _serve_cli("--project", root, "--json", *args, env=env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
        assert error["code"] == code, (args, error)
        assert "short" not in json.dumps(error) and "spaces" not in json.dumps(error)  # never the token itself


def test_the_server_object_starts_in_its_own_thread_and_stops(empty_project):
    from ratui.rest import RestOptions, RestServer

    port = free_port()
    server = RestServer(empty_project, RestOptions(port=port)).start()
    try:
        assert server.url == f"http://127.0.0.1:{port}/iceberg/main" and len(server.token) >= 32
        response = requests.get(f"{server.url}/v1/config", headers={"Authorization": f"Bearer {server.token}"},
                                timeout=30)
        check_response(response)
        assert response.status_code == 200
    finally:
        server.stop()
    assert not server.running
    with socket.socket() as probe:  # the port is free again
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


def test_the_serving_line_names_the_url_and_the_token_and_ctrl_c_stops_cleanly(empty_project):
    import os
    import signal

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ratui", "serve", "--project", str(empty_project), "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RATUI_SERVE_TOKEN": "a-token-of-this-test-0123"})
    try:
        first = proc.stdout.readline()
        assert first.strip() == (f"serving ratui's Iceberg REST catalog at http://127.0.0.1:{port}/iceberg/main  "
                                 "token a-token-of-this-test-0123")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "ratui serve: stopped after" in out and "Traceback" not in err
