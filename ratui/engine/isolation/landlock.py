"""Landlock: which files the process may read, write or run, which TCP ports it may connect to, and (scoping) no
signals or abstract UNIX sockets reaching outside its own domain. Unprivileged, binds root too, cannot be undone.

`restrict()` handles every right the running kernel's ABI knows (ABI 1 to 7): what is handled and not granted by a
rule is denied. So a file outside the given paths cannot be opened at all (EACCES), a TCP port not listed cannot be
connected to, no TCP port can be bound.

Per thread: landlock_restrict_self confines the calling thread and every thread and process it creates afterwards.
Threads that already run are NOT confined (ABI 7 has no way to reach them; a later ABI adds a flag for that), and
they share the address space, so code in a confined thread could make an unconfined one work for it. `restrict()`
therefore refuses to run while the process has other threads: call it first, before importing modules that start
threads (numpy's OpenBLAS starts a worker at import, pyarrow's jemalloc a background thread). Those modules import
fine afterwards from the allowed read paths, and their threads are then confined.

What Landlock (ABI 7) does not restrict, by design of the kernel: stat/lstat, access, chdir, chmod, chown, utime,
setxattr, flock and fcntl on files it can name anywhere (walking paths is free; only opening, creating, removing,
renaming and linking are checked; seccomp.install() denies chown and setxattr, chmod and utime stay open: a process
may change the mode of its user's own files anywhere); connecting to a UNIX socket that has a path in the
filesystem; listen() on an unbound TCP socket (it binds an ephemeral port without the bind check); TCP connections
to an allowed port on any address; UDP and other protocols (seccomp.install() denies those sockets and listen()).
File descriptors opened before restrict() keep working. /proc and /dev are not readable unless listed (add
"/dev/null" to `write` for code that writes there).
"""

from __future__ import annotations

import ctypes
import errno
import os
import site
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ratui.engine.isolation import ConfinementError
from ratui.engine.isolation._kernel import machine, set_no_new_privs, syscall, thread_count

# the same numbers on x86_64 and aarch64 (system calls from 403 on are shared by every architecture)
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446

LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RULE_NET_PORT = 2

# filesystem rights (linux/landlock.h)
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2: link or rename across directories
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5: ioctl on character and block devices

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# the newest ABI whose rights we know; a newer kernel is handled as this one (rights it added stay unhandled)
KNOWN_ABI = 7

_FS_ABI1 = (FS_MAKE_SYM << 1) - 1  # EXECUTE .. MAKE_SYM

# rights that apply to a file (the others are about directories: a path_beneath rule on a file with them is EINVAL)
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

# what each kind of path gets; devices, sockets, FIFOs and symbolic links cannot be made anywhere
READ_RIGHTS = FS_READ_FILE | FS_READ_DIR
WRITE_RIGHTS = (READ_RIGHTS | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG
                | FS_TRUNCATE | FS_REFER)
EXECUTE_RIGHTS = READ_RIGHTS | FS_EXECUTE


def handled_fs(abi_version: int) -> int:
    """Every filesystem right the given ABI can restrict."""
    rights = _FS_ABI1
    if abi_version >= 2:
        rights |= FS_REFER
    if abi_version >= 3:
        rights |= FS_TRUNCATE
    if abi_version >= 5:
        rights |= FS_IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),  # ABI 4
                ("scoped", ctypes.c_uint64)]  # ABI 6


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in linux/landlock.h: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


@dataclass(frozen=True)
class LandlockResult:
    """What restrict() applied. `abi` is the ABI whose rights were handled (the kernel's, at most KNOWN_ABI);
    `net`: TCP bind and connect are restricted (ABI 4+); `scoped`: signals and abstract UNIX sockets cannot reach
    outside the domain (ABI 6+ and scope=True); `rules`: the paths that got a rule; `skipped`: those that do not
    exist."""

    abi: int
    kernel_abi: int
    net: bool
    scoped: bool
    rules: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"landlock-abi{self.abi}"


# system folders a Python interpreter and compiled packages read after start-up: shared libraries dlopen()ed late
# (pyarrow needs libdl, glibc loads libgcc_s when a thread exits: without it Python aborts at exit), the loader's
# cache, and the time zone database (zoneinfo, pandas and pyarrow read /usr/share/zoneinfo; glibc /etc/localtime)
SYSTEM_READ_PATHS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
                     "/etc/localtime", "/usr/share/zoneinfo")


def runtime_read_paths() -> list[Path]:
    """What the running interpreter needs to read to keep importing and working once confined: its prefixes
    (the standard library, the virtual environment and its site-packages), ratui's own package (an editable
    install lives outside site-packages) and SYSTEM_READ_PATHS. Other editable installs, whose sources lie
    outside site-packages, are not included. Paths that do not exist are skipped by restrict()."""
    paths = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix, *site.getsitepackages(),
             os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), *SYSTEM_READ_PATHS]
    return [Path(p) for p in dict.fromkeys(paths)]


def abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is not built in (ENOSYS), not enabled at boot
    (EOPNOTSUPP), refused (e.g. by a container's seccomp profile), or on an architecture whose system call
    numbers we do not know."""
    if machine() is None:
        return 0
    try:
        return syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def restrict(*, read: Iterable[Path] = (), write: Iterable[Path] = (), execute: Iterable[Path] = (),
             connect_ports: Iterable[int] = (), bind_ports: Iterable[int] = (), sockets: Iterable[Path] = (),
             scope: bool = True) -> LandlockResult:
    """Confine the calling thread (and all it creates later) for good: every filesystem right the ABI handles
    is denied except beneath the given paths (recursively): `read` paths may be read and listed; `write` paths
    also written, truncated, and have files and folders made, removed and renamed in them; `execute` paths read
    and executed. A path that does not exist is skipped; a file gets the rights that apply to files. With ABI 4+,
    binding a TCP port not in `bind_ports` and connecting to one not in `connect_ports` are denied. `sockets`
    folders are `write` folders where UNIX sockets may be made too (a listening socket's file). With ABI 6+ and
    `scope`, no signal can be sent to a process outside the domain (the parent included) and no abstract UNIX
    socket created outside it can be connected to.

    Sets PR_SET_NO_NEW_PRIVS first. Raises ConfinementError when Landlock is unavailable, when other threads run
    (they would stay unconfined, see the module's docstring), or when the kernel refuses a call."""
    kernel_abi = abi()
    if kernel_abi <= 0:
        raise ConfinementError("Landlock is not available: the kernel has no Landlock (5.13+ with CONFIG_SECURITY_"
                               "LANDLOCK), it is not enabled at boot (lsm=...,landlock), the architecture is not "
                               "x86_64 or aarch64, or a seccomp profile (a container's) refuses its calls")
    used = min(kernel_abi, KNOWN_ABI)
    try:
        threads = thread_count()
    except OSError as exc:
        raise ConfinementError(f"cannot count this process's threads (/proc/self/task): {exc}",
                               exc.errno) from None
    if threads > 1:
        raise ConfinementError(
            f"{threads - 1} other thread(s) already run in this process; Landlock would confine only the calling "
            "thread, leaving them unconfined. Confine before starting threads or importing modules that start "
            "them (numpy, pyarrow)")

    fs = handled_fs(used)
    net = used >= 4
    scoped = used >= 6 and scope
    attr = _RulesetAttr(handled_access_fs=fs,
                        handled_access_net=(NET_BIND_TCP | NET_CONNECT_TCP) if net else 0,
                        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if scoped else 0)
    # the size names the fields this ABI knows (an older kernel refuses nonzero fields it does not know)
    size = 24 if used >= 6 else 16 if used >= 4 else 8
    try:
        ruleset = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    except OSError as exc:
        raise ConfinementError(f"landlock_create_ruleset (ABI {used}) failed: {exc.strerror}", exc.errno) from None
    try:
        rules, skipped = _add_path_rules(ruleset, fs, read=read, write=write, execute=execute, sockets=sockets)
        if net:
            _add_port_rules(ruleset, connect_ports)
            _add_port_rules(ruleset, bind_ports, NET_BIND_TCP)
        try:
            set_no_new_privs()
        except OSError as exc:
            raise ConfinementError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {exc.strerror}", exc.errno) from None
        try:
            syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
        except OSError as exc:
            raise ConfinementError(f"landlock_restrict_self failed: {exc.strerror}", exc.errno) from None
    finally:
        os.close(ruleset)
    return LandlockResult(abi=used, kernel_abi=kernel_abi, net=net, scoped=scoped, rules=tuple(rules),
                          skipped=tuple(skipped))


def _add_path_rules(ruleset: int, handled: int, *, read: Iterable[Path], write: Iterable[Path],
                    execute: Iterable[Path], sockets: Iterable[Path] = ()) -> tuple[list[str], list[str]]:
    wanted: dict[str, int] = {}  # a path named in several lists gets the union of their rights
    for paths, rights in ((read, READ_RIGHTS), (write, WRITE_RIGHTS), (execute, EXECUTE_RIGHTS),
                          (sockets, WRITE_RIGHTS | FS_MAKE_SOCK)):
        if isinstance(paths, (str, bytes, os.PathLike)):
            raise ConfinementError(f"expected a list of paths, got one path: {paths!r}")
        for entry in paths:
            key = os.fspath(entry)
            wanted[key] = wanted.get(key, 0) | rights
    rules: list[str] = []
    skipped: list[str] = []
    for path, rights in wanted.items():
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            skipped.append(path)
            continue
        except OSError as exc:
            raise ConfinementError(f"cannot open {path} for a Landlock rule: {exc.strerror}", exc.errno) from None
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= FILE_RIGHTS
            rule = _PathBeneathAttr(allowed_access=rights & handled, parent_fd=fd)
            try:
                syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0))
            except OSError as exc:
                raise ConfinementError(f"landlock_add_rule for {path} failed: {exc.strerror}", exc.errno) from None
        finally:
            os.close(fd)
        rules.append(path)
    return rules, skipped


def _add_port_rules(ruleset: int, ports: Iterable[int], access: int = NET_CONNECT_TCP) -> None:
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfinementError(f"not a TCP port: {port!r}", errno.EINVAL)
        rule = _NetPortAttr(allowed_access=access, port=port)
        try:
            syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_NET_PORT),
                    ctypes.byref(rule), ctypes.c_uint32(0))
        except OSError as exc:
            raise ConfinementError(f"landlock_add_rule for TCP port {port} failed: {exc.strerror}",
                                   exc.errno) from None
