"""Where Spark is, in words a person may see: Spark Connect URLs and their parameters, master addresses, loopback,
and any token kept out of a text (`sc://HOST:PORT` is shown, never `;token=...`); whether anything listens there."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlparse

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import SETTINGS_FILE
from ratui.engine.spark.errors import UNREACHABLE_CODE

# How long ratui waits for a Spark Connect server or a cluster master to accept a connection before it gives
# up (the Connect client alone would retry an unreachable server for ten minutes).
CONNECT_TIMEOUT_SECONDS = 5.0

_TOKEN_TEXT = re.compile(r"(token\s*[=:]\s*|bearer\s+|authorization[\"']?\s*[:,=]\s*[\"']?(?:bearer\s+)?)[^\s;&,'\"]+",
                         re.IGNORECASE)

def redact(text: str) -> str:
    """`text` with any token in it (token=..., Bearer ..., an Authorization header's value) replaced by ***."""
    return _TOKEN_TEXT.sub(lambda m: f"{m.group(1)}***", text)

def url_params(url: str) -> dict[str, str]:
    """sc://HOST:PORT/;key=value;key=value -> {key: value} (keys lower-cased)."""
    _, _, tail = url.partition("/;")
    params = {}
    for part in tail.split(";"):
        key, sep, value = part.partition("=")
        if sep:
            params[key.strip().lower()] = value.strip()
    return params

def display_url(url: str) -> str:
    """sc://HOST:PORT without its parameters (a token must never reach the screen or a log)."""
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}" if parsed.netloc else url.split("/;", 1)[0]

def remote_address(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    return parsed.hostname or "localhost", parsed.port or 15002

def master_addresses(master: str) -> list[tuple[str, int]]:
    """spark://h1:7077,h2:7077 -> [(h1, 7077), (h2, 7077)]."""
    out = []
    for part in master[len("spark://"):].split(","):
        host, _, port = part.strip().rpartition(":")
        out.append((host or part.strip(), int(port) if port.isdigit() else 7077))
    return out

def is_loopback(host: str) -> bool:
    if host in ("localhost", "::1") or host.startswith("127."):
        return True
    try:
        return socket.gethostbyname(host).startswith("127.")
    except OSError:
        return False

def check_reachable(host: str, port: int, what: str, setting: str) -> None:
    """Fail fast, with a coded error, when nothing listens where ratui.yaml says Spark is."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise RatuiError(UNREACHABLE_CODE, f"{what} is not reachable: {reason}",
                     hint=f"Start it, or point {setting} in {SETTINGS_FILE} (or SPARK_REMOTE) at a running one.")
