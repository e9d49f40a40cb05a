"""Fault injection for the reliability suite: RATUI_FAILPOINT=kill:NAME SIGKILLs this process at point NAME.

Points: `kill:PHASE` as each phase of a run starts (branch, config, build, write, quality, resolve), `kill:commit`
after a write's data files are written and before its snapshot is committed, `kill:compact` after the reaper's
compaction wrote its files and before it commits, `kill:merged` after Nessie accepted a merge and before the
project's database records it (the Nessie catalog's one gap). Unset in normal use; it exists so tests can prove that
a process killed at any of these points leaves main exactly as it was.
"""

from __future__ import annotations

import os

FAILPOINT_ENV = "RATUI_FAILPOINT"


def failpoint(name: str) -> None:
    if os.environ.get(FAILPOINT_ENV) == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
