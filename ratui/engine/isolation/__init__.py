"""Confinement of a Python pipeline's child process, as plain Linux system calls (ctypes, no helper binary).

The child confines itself before it loads the user's module, in this order: `limits` (resource limits, the parent
death signal), `landlock.restrict` (which files it may read, write or run, which TCP ports it may connect to, no
signals or abstract sockets outside its domain), then `seccomp.install` (no new processes, no program execution, no
kernel-administration calls, only AF_UNIX and IPv4 TCP sockets). Both Landlock and seccomp bind root too; neither
can be lifted once applied, by the process or anything it starts.

Each part fails with `ConfinementError`, never with a ctypes traceback: a child that cannot confine itself must not
run the user's code.
"""

from __future__ import annotations


class ConfinementError(Exception):
    """The process could not be confined as asked (the kernel lacks a feature, refused a call, or the process is
    in a state where confinement would not hold, e.g. other threads already run). `errno` is the failing system
    call's error number when one failed."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno
