"""The running `ratui web` servers of a project, for `ratui web list` (as `jupyter server list` does).

Each server writes one file, `.ratui/web/server-{pid}.json`, readable by its owner only (0600, in a 0700
folder): it holds the URL with the token, so whoever can read it can use the console, exactly like the user who
started the server. The file goes when the server stops; one left by a server that was killed is recognised by
its pid and the process's start time and removed by the next `list`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

FOLDER = "web"


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    started: float  # the process's start time (psutil), so a reused pid is not taken for this server
    url: str  # with ?token=...
    project: str
    host: str
    port: int
    read_only: bool
    since: str  # ISO time the server started serving

    @property
    def bare_url(self) -> str:
        return self.url.split("?", 1)[0]


def folder(root: Path) -> Path:
    return Path(root) / ".ratui" / FOLDER


def _path(root: Path, pid: int) -> Path:
    return folder(root) / f"server-{pid}.json"


def register(root: Path, *, url: str, host: str, port: int, read_only: bool) -> Path:
    """Write this process's entry (0600) and return its path."""
    pid = os.getpid()
    info = ServerInfo(pid=pid, started=psutil.Process(pid).create_time(), url=url, project=str(Path(root)),
                      host=host, port=port, read_only=read_only,
                      since=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    where = folder(root)
    where.mkdir(parents=True, exist_ok=True)
    os.chmod(where, 0o700)
    path = _path(root, pid)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(asdict(info), fh)
    return path


def unregister(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)


def _alive(info: ServerInfo) -> bool:
    try:
        return abs(psutil.Process(info.pid).create_time() - info.started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def running(root: Path) -> list[ServerInfo]:
    """The project's live servers, oldest first; entries of servers that are gone are removed."""
    found: list[ServerInfo] = []
    where = folder(root)
    if not where.is_dir():
        return found
    for path in sorted(where.glob("server-*.json")):
        try:
            info = ServerInfo(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # half written or damaged: no server can be reached through it
            continue
        if _alive(info):
            found.append(info)
        else:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda i: i.started)
