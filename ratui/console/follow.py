"""Following what changes outside the console: the state database and the project tree, polled on a thread.

Other processes write the same SQLite file (a `ratui run` in another terminal, `ratui watch`, a second console, the
dead-run monitor, the reaper): SQLite's `PRAGMA data_version` changes on this follower's own connection whenever
another connection commits, so one cheap query a second says whether anything is new, and only then do the
screens reload. The project tree (ratui.yaml and every pipeline folder's files) is compared by name, size and
modification time: a saved template, a fixed error or a new pipeline folder reaches the Pipelines screen within
about a second, watch mode or not. Walking the tree costs with its size (15,000 pipelines: about 0.7 s of CPU, a
core held every second and the console's own thread starved of the interpreter), so the tree is looked at again only
after TREE_DUTY times what the last look cost: never more than a tenth of a core, every second up to some thousands
of pipelines, every few seconds beyond.

A catalog on a server (Nessie) is shared with clients that never touch this SQLite file: another installation's
runs, a branch made with Nessie's own tools. Its `change_token()` (every ref's head, one request) is asked every
CATALOG_INTERVAL seconds, and a change reaches the screens as the database's does.

Nothing here touches the event loop: the follower posts items to the controller's queue, as engine events do.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

log = logging.getLogger("ratui.console.follow")

INTERVAL = 1.0  # seconds
TREE_DUTY = 10  # the project tree is walked again after this many times the last walk's duration (or INTERVAL)
CATALOG_INTERVAL = 2.0  # seconds between two questions to a catalog server


@dataclass(frozen=True)
class StateItem:
    kind: str  # "db": another process committed to the state database | "project": the project tree changed
    others_active: int = 0  # "db": runs in flight in other processes


def project_fingerprint(root: Path) -> dict[str, tuple[int, int]]:
    """ratui.yaml and the files and folders under every namespace's pipelines/ folder: path -> (size, mtime_ns)
    (a folder: (0, 0)). One os.scandir per folder and one stat per file; hidden names, __pycache__ and editors'
    droppings left out."""
    out: dict[str, tuple[int, int]] = {}
    try:
        st = (root / "ratui.yaml").stat()
        out["ratui.yaml"] = (st.st_size, st.st_mtime_ns)
    except OSError:
        pass
    try:
        namespaces = [p for p in root.iterdir() if not p.name.startswith(".") and (p / "pipelines").is_dir()]
    except OSError:
        return out
    base = len(str(root)) + 1
    stack = [str(ns / "pipelines") for ns in namespaces]
    while stack:
        folder = stack.pop()
        out[folder[base:] + "/"] = (0, 0)
        try:
            scan = os.scandir(folder)
        except OSError:
            continue
        with scan:
            for item in scan:
                name = item.name
                if name.startswith("."):
                    continue
                try:
                    if item.is_dir(follow_symlinks=False):
                        if name != "__pycache__":
                            stack.append(item.path)
                        continue
                    if name.endswith(("~", ".swp", ".tmp")):
                        continue
                    st = item.stat()
                except OSError:
                    continue
                out[item.path[base:]] = (st.st_size, st.st_mtime_ns)
    return out


class Follower:
    """Polls every INTERVAL seconds until stopped; calls `post(StateItem)` when something changed."""

    def __init__(self, root: Path, db_path: Path, post: Callable[[StateItem], None],
                 others_active: Callable[[], int], catalog_token: Callable[[], object] | None = None):
        self.root = Path(root)
        self.db_path = Path(db_path)
        self.post = post
        self.others_active = others_active
        self.catalog_token = catalog_token  # a shared catalog's change token (None: nothing to follow there)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Follower":
        """Start following: the database's state now is the baseline (read here, before start returns), so a commit
        made once start has returned is news, however soon after it comes."""
        if self._thread is None:
            conn, version = self._baseline()
            self._thread = threading.Thread(target=self._loop, args=(conn, version), name="ratui-follow",
                                            daemon=True)
            self._thread.start()
        return self

    def _baseline(self) -> tuple[sqlite3.Connection | None, int | None]:
        """The follower's connection (handed to its thread) and its data_version now; (None, None) when the
        database cannot be read yet (the loop tries again)."""
        try:
            conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=1.0, check_same_thread=False)
        except Exception:
            log.debug("following the state database failed", exc_info=True)
            return None, None
        try:
            return conn, conn.execute("PRAGMA data_version").fetchone()[0]
        except Exception:
            log.debug("following the state database failed", exc_info=True)
            conn.close()
            return None, None

    def stop(self) -> None:
        self._stop.set()

    def _loop(self, conn: sqlite3.Connection | None, version: int | None) -> None:
        began = time.monotonic()
        tree = project_fingerprint(self.root)
        tree_next = time.monotonic() + (time.monotonic() - began) * TREE_DUTY
        others = 0  # what the App assumes until told otherwise
        catalog = self._catalog_token()
        asked = time.monotonic()
        while not self._stop.wait(INTERVAL):
            try:
                if conn is None:
                    conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=1.0)
                now = conn.execute("PRAGMA data_version").fetchone()[0]
                if now != version:
                    changed = version is not None
                    version = now
                    count = self.others_active()
                    if changed or count != others:
                        others = count
                        self.post(StateItem("db", count))
            except Exception:  # a busy or missing database: try again next time
                log.debug("following the state database failed", exc_info=True)
                if conn is not None:
                    conn.close()
                    conn = None
            if self.catalog_token is not None and time.monotonic() - asked >= CATALOG_INTERVAL:
                asked = time.monotonic()
                now_catalog = self._catalog_token()
                if now_catalog is not None and now_catalog != catalog:
                    changed, catalog = catalog is not None, now_catalog
                    if changed:
                        self.post(StateItem("db", others))
            if time.monotonic() < tree_next:
                continue
            began = time.monotonic()
            try:
                now_tree = project_fingerprint(self.root)
                if now_tree != tree:
                    tree = now_tree
                    self.post(StateItem("project"))
            except Exception:
                log.debug("following the project tree failed", exc_info=True)
            tree_next = time.monotonic() + (time.monotonic() - began) * TREE_DUTY
        if conn is not None:
            conn.close()

    def _catalog_token(self) -> object | None:
        """The catalog's change token; None when there is none or the server did not answer (asked again later)."""
        if self.catalog_token is None:
            return None
        try:
            return self.catalog_token()
        except Exception:
            log.debug("following the catalog failed", exc_info=True)
            return None
