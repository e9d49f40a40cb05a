"""Resource limits, the parent-death signal and the environment of a pipeline's child process.

`Limits.apply()` sets rlimits for the calling process (they are per process and inherited by anything it starts).
Each limit sets both the soft and the hard value, so the process cannot raise it back, and only ever lowers what is
already there. A root process could raise hard limits again (CAP_SYS_RESOURCE): seccomp.install() denies setrlimit
and prlimit64 with a new limit, so install it after apply().

No process-count limit: RLIMIT_NPROC counts every process and thread of the real user (the console's and any other
program's too, so no number fits the child alone), and root ignores it. The child cannot fork (seccomp), and its
threads are bounded by `memory_bytes` (each thread's stack is address space).
"""

from __future__ import annotations

import os
import resource
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ratui.engine.isolation import ConfinementError
from ratui.engine.isolation._kernel import PR_SET_PDEATHSIG, prctl

# CPU seconds between SIGXCPU (the soft limit) and SIGKILL (the hard one): a process that catches or ignores
# SIGXCPU still ends, and one that does not ends by SIGXCPU, which tells the runner why
CPU_GRACE_SECONDS = 2


@dataclass(frozen=True)
class Limits:
    """Limits of one child process; None leaves that limit as it is.

    cpu_seconds: CPU time of the whole process (all threads, interpreter start-up and imports included). At the
        limit the kernel sends SIGXCPU (the process ends by it unless it handles it), CPU_GRACE_SECONDS later
        SIGKILL. Wall-clock time is the runner's business (a timeout), not this.
    memory_bytes: RLIMIT_AS (address space: every mapping, thread stacks included) and RLIMIT_DATA (heap and
        private writable mappings). An allocation beyond it fails: Python raises MemoryError, a new thread fails
        with RuntimeError ("can't start new thread"). Counts reserved address space, not resident memory:
        allocators that reserve large arenas (jemalloc, OpenBLAS buffers per thread) need headroom; 1 GiB fits
        pyarrow and pandas.
    file_bytes: RLIMIT_FSIZE, the largest file the process may write. Python ignores SIGXFSZ, so a write beyond it
        fails with OSError EFBIG instead of killing the process.
    open_files: RLIMIT_NOFILE, one more than the highest file descriptor number the process may open.
    core_bytes: RLIMIT_CORE, 0: no core dump (it would hold the process's memory: data, keys).
    """

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    file_bytes: int | None = None
    open_files: int | None = None
    core_bytes: int | None = 0

    def apply(self) -> None:
        """Lower this process's limits to these values (never raise one). Raises ConfinementError when the
        kernel refuses."""
        if self.cpu_seconds is not None:
            _lower(resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + CPU_GRACE_SECONDS)
        if self.memory_bytes is not None:
            _lower(resource.RLIMIT_AS, self.memory_bytes, self.memory_bytes)
            _lower(resource.RLIMIT_DATA, self.memory_bytes, self.memory_bytes)
        if self.file_bytes is not None:
            _lower(resource.RLIMIT_FSIZE, self.file_bytes, self.file_bytes)
        if self.open_files is not None:
            _lower(resource.RLIMIT_NOFILE, self.open_files, self.open_files)
        if self.core_bytes is not None:
            _lower(resource.RLIMIT_CORE, self.core_bytes, self.core_bytes)


def _lower(which: int, soft: int, hard: int) -> None:
    if soft < 0 or hard < 0:
        raise ConfinementError(f"a resource limit cannot be negative: {soft}, {hard}")
    old_soft, old_hard = resource.getrlimit(which)
    if old_hard != resource.RLIM_INFINITY:
        hard = min(hard, old_hard)
    soft = min(soft, hard)
    if old_soft != resource.RLIM_INFINITY:
        soft = min(soft, old_soft)
    try:
        resource.setrlimit(which, (soft, hard))
    except (OSError, ValueError) as exc:
        raise ConfinementError(f"setrlimit({which}, {soft}, {hard}) failed: {exc}") from None


def die_with_parent(expected_parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), then end at once if the
    parent is already gone (it died before the prctl: we were re-parented, getppid() changed).

    The signal fires when the parent *thread* that started us ends, not the parent process: the runner must start
    the child from a thread that outlives it (its main thread, or a thread that waits for the child)."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError as exc:
        raise ConfinementError(f"prctl(PR_SET_PDEATHSIG) failed: {exc.strerror}", exc.errno) from None
    if os.getppid() != expected_parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


# variables a child may inherit, by name or prefix: the locale (how text is decoded, sorted, formatted) and the
# time zone (local time); nothing else of the parent's environment reaches the user's code
_INHERITED = ("LANG", "LANGUAGE", "TZ")
_INHERITED_PREFIXES = ("LC_",)


def child_environment(base: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """The environment of a child, by allow-list: never credentials (AWS_*, tokens), never the parent's Spark, Java
    or Python settings (SPARK_*, JAVA_*, PYTHONPATH), which the child does not need and a user's code could read.

    PATH: fixed "/usr/bin:/bin" (the child cannot run programs anyway; libraries that look one up find nothing
        of the user's).
    LANG, LANGUAGE, LC_*: the parent's locale, so text is decoded and formatted as in the console.
    TZ: the parent's time zone, when it sets one (else glibc reads /etc/localtime).
    HOME, TMPDIR: the scratch folder, the one writable place (`~` and tempfile resolve there; nothing of the
        user's home directory).
    PYTHONIOENCODING=utf-8: for a child run without -I/-E; `python -I` ignores every PYTHON* variable, so launch
        the child with `-X utf8` too for UTF-8 standard streams whatever the locale. No PYTHONHASHSEED: hash
        randomization stays on (it is what defeats hash-collision inputs).
    MALLOC_ARENA_MAX=2: glibc reserves 64 MiB of address space per malloc arena, up to one per thread; under the
        memory limit (RLIMIT_AS) a client with a dozen threads (gRPC's) would spend it on reservations alone.
    """
    env = {name: value for name, value in base.items()
           if name in _INHERITED or name.startswith(_INHERITED_PREFIXES)}
    env.update({"PATH": "/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch),
                "PYTHONIOENCODING": "utf-8", "MALLOC_ARENA_MAX": "2"})
    return env
