"""Warm engines for tests that run the installed `ratui` as a user does: a user's commands run warm by default.

tests/conftest.py sets RATUI_WARM=0 for the whole suite, so no test leaves an engine behind by accident. A test whose
commands a user would type one after another on one project (the getting-started page, the Nessie command-line
walk) turns the engine back on with `warm_engines(folder)`: the engines live in that folder of the test's own
(RATUI_ENGINE_DIR), and every engine started there is stopped when the block ends, whatever the test did. The
cold path keeps tests of its own (tests/cli/test_stop_signals.py, test_cli.py, the corpus), and
tests/cli/test_warm_engine.py proves warm and cold print the same.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

STOP_BOUND = 60.0  # seconds for an engine to end on SIGTERM (it cancels its runs and stops its JVM) before SIGKILL


def engine_pids(engines: Path) -> list[int]:
    """The warm engines started with RATUI_ENGINE_DIR=engines, found by their command line and environment."""
    marker = f"RATUI_ENGINE_DIR={engines}".encode()
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ratui.warm.host" in words and marker in environ:
            pids.append(int(proc.name))
    return pids


def stop_engines(engines: Path) -> None:
    """SIGTERM to every engine of the folder, SIGKILL to one that has not ended within STOP_BOUND."""
    pids = engine_pids(engines)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_BOUND
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        time.sleep(0.1)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


@contextmanager
def warm_engines(engines: Path) -> Iterator[dict[str, str]]:
    """The environment variables that let a `ratui` command run warm with its engine in `engines`; every engine of
    that folder is stopped on the way out."""
    engines.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        yield {"RATUI_WARM": "1", "RATUI_ENGINE_DIR": str(engines)}
    finally:
        stop_engines(engines)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
