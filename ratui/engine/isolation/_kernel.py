"""System calls through ctypes, for the confinement modules: which architecture's numbers apply, `syscall(2)`
and `prctl(2)` raising OSError (never a ctypes traceback)."""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39

_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def machine() -> str | None:
    """"x86_64" or "aarch64" when this is a 64-bit little-endian process on one of them (the only ones whose
    system call numbers we know), else None. A 32-bit Python on a 64-bit kernel has other numbers: None."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    return _MACHINES.get(os.uname().machine)


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def syscall(number: int, *args: object) -> int:
    """syscall(2): the result, or OSError with the call's errno."""
    call = _libc().syscall
    call.restype = ctypes.c_long
    ctypes.set_errno(0)
    result = call(ctypes.c_long(number), *args)
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2): the result, or OSError with the call's errno."""
    call = _libc().prctl
    call.restype = ctypes.c_int
    call.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    ctypes.set_errno(0)
    result = call(option, arg2, arg3, arg4, arg5)
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def set_no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS for the calling thread (inherited by threads and processes it creates): execve can
    no longer grant privileges (set-user-ID, file capabilities). Required before an unprivileged seccomp filter
    or Landlock domain; it cannot be unset."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def thread_count() -> int:
    """How many threads this process runs now (native ones included, e.g. a BLAS or allocator worker that
    Python's threading module does not know about), from /proc/self/task."""
    return len(os.listdir("/proc/self/task"))
