"""Process identity: a pid alone is not a process (pids are reused), a pid plus its start time is.

A run records the pid and the start time of the process running it; a later check calls that process alive only
if a process with that pid exists AND started at that time. psutil reads the start time portably (Linux /proc,
macOS, Windows).
"""

from __future__ import annotations

import os

import psutil

# start times are read with 10 ms resolution on Linux; allow for float round-trips through SQLite
TOLERANCE_SECONDS = 1.0


def started_at(pid: int | None = None) -> float | None:
    """When the process `pid` (default: this one) started, in seconds since the epoch; None if it is gone."""
    try:
        return psutil.Process(pid or os.getpid()).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.Error:
        return None


def alive(pid: int, started: float | None = None) -> bool:
    """Is the process that recorded (`pid`, `started`) still running? Without a recorded start time (a run
    written by an older ratui), any process with that pid counts."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if started is None:
            return True
        return abs(proc.create_time() - started) <= TOLERANCE_SECONDS
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # alive, owned by someone else; its start time is still readable on Linux
        return True
