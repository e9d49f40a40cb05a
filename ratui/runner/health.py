"""The runner's `/healthz` on 127.0.0.1: alive, the last loop's time, the lease and who holds it (JSON); and its
`/metrics` (Prometheus's text format, metrics.py).

The door is every ratui endpoint's (endpoint_access.py, as `ratui serve` applies it): a Host that is not one of
this server's names is refused (403), so is a request carrying another site's Origin (403); the per-launch token
must come as `Authorization: Bearer TOKEN` (401 without, 403 when wrong), compared in constant time. Nothing here
logs a request or names the token.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from ratui.endpoint_access import HostRules, bearer, bind_error, same

RUNNER_ADDRESS_CODES = {"in_use": "RAT-SCH-006", "port": "RAT-SCH-006", "host": "RAT-SCH-006"}


class HealthServer:
    def __init__(self, port: int, token: str, status: Callable[[], dict[str, Any]], host: str = "127.0.0.1",
                 metrics: Callable[[], tuple[bytes, str]] | None = None):
        self.token = token
        self.status = status
        self.metrics = metrics
        self.rules = HostRules(port=port)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                code, body = outer.answer(self.path, self.headers)
                kind = "application/json"
                if code == 200 and self.path.split("?", 1)[0] == "/metrics" and outer.metrics is not None:
                    data, kind = outer.metrics()
                else:
                    data = json.dumps(body, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # never a request line on the runner's output
                return

        try:
            self.server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise bind_error(host, port, exc, RUNNER_ADDRESS_CODES) from None
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.rules = HostRules(port=self.port)
        self._thread = threading.Thread(target=self.server.serve_forever, name="ratui-up-health", daemon=True)

    def start(self) -> "HealthServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, headers: Any) -> tuple[int, dict[str, Any]]:
        host = headers.get("Host")
        if not self.rules.host_allowed(host):
            return 403, {"error": "this host name is not one of this endpoint's (127.0.0.1, localhost, [::1])"}
        origin = headers.get("Origin")
        if origin is not None and not self.rules.origin_matches(origin, host):
            return 403, {"error": "a request from a web page of another site (its Origin header) is refused"}
        given = bearer(headers.get("Authorization"))
        if given is None:
            return 401, {"error": "send `Authorization: Bearer TOKEN` (RATUI_UP_TOKEN or --token, else the one "
                                  "in the project's .ratui/runner.token)"}
        if not same(given, self.token):
            return 403, {"error": "this is not the token of this runner"}
        where = path.split("?", 1)[0]
        if where == "/metrics" and self.metrics is not None:
            return 200, {}
        if where != "/healthz":
            return 404, {"error": "only /healthz and /metrics are served"}
        return 200, self.status()
