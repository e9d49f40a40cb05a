"""Fault injection and gates for the tests: RATUI_FAILPOINT names one point and what happens there.

`RATUI_FAILPOINT=kill:NAME` SIGKILLs this process at point NAME. `RATUI_FAILPOINT=hold:NAME` holds the thread that
reaches NAME until the file named by RATUI_FAILPOINT_GATE exists (it first creates that path + ".reached"), so a
test in another process knows the run is there and can act on it (press a key, send a signal, cancel) before it
lets the run go on; a hold never lasts more than HOLD_SECONDS.

Points: `PHASE` as each phase of a run starts (branch, config, build, write, quality, resolve), `PHASE:PIPELINE`
the same for one pipeline (ecommerce.bronze.raw_orders), `test:NAME` as the quality test NAME is prepared (its
table's view already registered), `commit` after a write's data files are written and before
its snapshot is committed, `compact` after the reaper's compaction wrote its files and before it commits, `merged`
after Nessie accepted a merge and before the project's database records it (the Nessie catalog's one gap). The
call sites name them `kill:POINT`. Unset in normal use; it exists so tests can prove that a process killed at any
of these points leaves main exactly as it was, and can hold a run where they need it instead of guessing a time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

FAILPOINT_ENV = "RATUI_FAILPOINT"
GATE_ENV = "RATUI_FAILPOINT_GATE"
HOLD_SECONDS = 600.0


def failpoint(name: str) -> None:
    wanted = os.environ.get(FAILPOINT_ENV)
    if not wanted:
        return
    action, _, point = wanted.partition(":")
    if point != name.removeprefix("kill:"):
        return
    if action == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "hold":
        _hold(Path(os.environ[GATE_ENV]))


def _hold(gate: Path) -> None:
    Path(f"{gate}.reached").touch()
    deadline = time.monotonic() + HOLD_SECONDS
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
