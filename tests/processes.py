"""Stopping a server a test started in its own session: its whole process group, politely, then for sure."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the group (start_new_session: its id is the leader's pid), SIGKILL after `grace` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
