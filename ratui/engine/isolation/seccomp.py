"""seccomp: a classic-BPF system call filter for the calling process (all its threads), for good.

What it denies (EPERM unless said otherwise), on top of what Landlock restricts:

- new processes and programs: fork, vfork, clone without CLONE_THREAD or with a namespace flag (threads keep
  working), execve, execveat. clone3 fails with ENOSYS instead: its flags sit in a struct the filter cannot read,
  and glibc (2.34+) falls back to clone on ENOSYS, for pthread_create and posix_spawn alike.
- reaching into other processes or the kernel: ptrace, process_vm_readv/writev, pidfd_getfd, process_madvise,
  perf_event_open, bpf, userfaultfd, io_uring_*, keyctl, add_key, request_key, open_by_handle_at,
  name_to_handle_at, personality (other than the query, 0xffffffff); signals to another process (kill,
  rt_sigqueueinfo aim at this process only, tgkill and rt_tgsigqueueinfo at its threads only; tkill and
  pidfd_send_signal denied), a second fence beside Landlock's signal scoping (ABI 6+).
- mounts and namespaces: mount, umount2, the new mount API (open_tree, move_mount, fsopen, fsconfig, fsmount,
  fspick, mount_setattr, open_tree_attr), unshare, setns, pivot_root, chroot.
- kernel modules and kexec: init_module, finit_module, delete_module, kexec_load, kexec_file_load.
- what a root child could otherwise do with its capabilities (Landlock and rlimits do not stop these): raise its
  resource limits back (setrlimit; prlimit64 with a new limit; reading limits stays allowed), change owners
  (chown family), set or remove extended attributes (a file capability is one; shutil's copy2 tolerates EPERM
  here), set inode flags (file_setattr), reboot, swapon/off, set the host name or the clock, iopl/ioperm, acct,
  quotactl, syslog, vhangup, fanotify_init, uselib, lookup_dcookie.
- sockets: socket() only for AF_INET with SOCK_STREAM and protocol 0 or IPPROTO_TCP (Landlock's port rules see
  TCP only: MPTCP or SCTP over SOCK_STREAM would get around them): no UDP, raw, IPv6, netlink, packet. socketpair()
  only for AF_UNIX. socket(AF_UNIX) only with `unix_sockets=True`: Landlock (ABI 7) does not check connecting to a
  UNIX socket that has a path, so such a socket anywhere is reachable (the user's ssh-agent, the D-Bus session bus
  and its keyring, docker.sock); a pipeline has no use for one (socketpair and the TCP data port remain).
  listen(): denied, on any socket. Landlock denies bind() to TCP ports, but listen() on an unbound socket binds an
  ephemeral port on every interface without asking it, which would let the network connect in.
- another architecture's calling convention (i386 on x86_64, whose numbers differ): the process is killed. x32
  system calls on x86_64 (numbers with bit 30 set): EPERM.

A system call this kernel does not have (aarch64 has no fork, vfork, chown, iopl...) is left out. The filter is
installed with SECCOMP_FILTER_FLAG_TSYNC, so threads that already run get it too.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct

from ratui.engine.isolation import ConfinementError
from ratui.engine.isolation._kernel import machine, set_no_new_privs, syscall

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
X32_SYSCALL_BIT = 0x40000000

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = (0x00020000  # CLONE_NEWNS
                    | 0x02000000  # CLONE_NEWCGROUP
                    | 0x04000000  # CLONE_NEWUTS
                    | 0x08000000  # CLONE_NEWIPC
                    | 0x10000000  # CLONE_NEWUSER
                    | 0x20000000  # CLONE_NEWPID
                    | 0x40000000)  # CLONE_NEWNET
IPPROTO_TCP = 6
PERSONALITY_QUERY = 0xFFFFFFFF

# classic BPF (linux/bpf_common.h)
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian here)
_NR = 0
_ARCH = 4


def _arg_low(index: int) -> int:
    """Offset of the low 32 bits of argument `index`. Every argument we test is a C int or unsigned int (the
    kernel reads only the low half; clone's flags too: lower_32_bits(clone_flags))."""
    return 16 + 8 * index


def _arg_high(index: int) -> int:
    return 16 + 8 * index + 4


# system calls denied outright, by name; the numbers per architecture are below (None: the architecture has none)
DENIED = (
    "fork", "vfork", "execve", "execveat",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "perf_event_open", "bpf",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
    "open_by_handle_at", "name_to_handle_at", "tkill", "pidfd_send_signal", "listen",
    "mount", "umount2", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_tree_attr", "unshare", "setns", "pivot_root", "chroot",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "setrlimit", "chown", "fchown", "lchown", "fchownat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "setxattrat", "removexattrat", "file_setattr", "reboot", "swapon", "swapoff",
    "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
    "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "fanotify_init", "uselib", "lookup_dcookie",
)

# 403 and up are the same number on every architecture
_SHARED = {"pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
           "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
           "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442, "quotactl_fd": 443,
           "setxattrat": 463, "removexattrat": 466, "open_tree_attr": 467, "file_setattr": 469}

SYSCALLS: dict[str, dict[str, int | None]] = {
    "x86_64": {
        "fork": 57, "vfork": 58, "clone": 56, "execve": 59, "execveat": 322, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
        "keyctl": 250, "add_key": 248, "request_key": 249, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "personality": 135, "socket": 41, "socketpair": 53, "listen": 50, "kill": 62, "tkill": 200, "tgkill": 234,
        "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "mount": 165, "umount2": 166, "unshare": 272,
        "setns": 308, "pivot_root": 155, "chroot": 161, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "setrlimit": 160, "prlimit64": 302,
        "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260, "setxattr": 188, "lsetxattr": 189,
        "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "reboot": 169,
        "swapon": 167, "swapoff": 168, "sethostname": 170, "setdomainname": 171, "settimeofday": 164,
        "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "iopl": 172, "ioperm": 173, "acct": 163,
        "quotactl": 179, "syslog": 103, "vhangup": 153, "fanotify_init": 300, "uselib": 134,
        "lookup_dcookie": 212, **_SHARED,
    },
    "aarch64": {  # asm-generic numbering: no fork, vfork, chown, lchown, iopl, ioperm, uselib
        "fork": None, "vfork": None, "clone": 220, "execve": 221, "execveat": 281, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
        "keyctl": 219, "add_key": 217, "request_key": 218, "open_by_handle_at": 265, "name_to_handle_at": 264,
        "personality": 92, "socket": 198, "socketpair": 199, "listen": 201, "kill": 129, "tkill": 130, "tgkill": 131,
        "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "mount": 40, "umount2": 39, "unshare": 97,
        "setns": 268, "pivot_root": 41, "chroot": 51, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "setrlimit": 164, "prlimit64": 261,
        "chown": None, "fchown": 55, "lchown": None, "fchownat": 54, "setxattr": 5, "lsetxattr": 6,
        "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "reboot": 142,
        "swapon": 224, "swapoff": 225, "sethostname": 161, "setdomainname": 162, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "iopl": None, "ioperm": None, "acct": 89,
        "quotactl": 60, "syslog": 116, "vhangup": 58, "fanotify_init": 262, "uselib": None,
        "lookup_dcookie": 18, **_SHARED,
    },
}

_Jump = int | str  # a relative offset, or a label resolved by _assemble
_Instruction = tuple[int, _Jump, _Jump, int]


def _assemble(program: list[_Instruction | str]) -> list[tuple[int, int, int, int]]:
    """Resolve labels (a str in the program marks the next instruction; a str jump target names one)."""
    labels: dict[str, int] = {}
    instructions: list[_Instruction] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)
    out = []
    for index, (code, jt, jf, k) in enumerate(instructions):
        offsets = [labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= o <= 255 for o in offsets):
            raise AssertionError(f"BPF jump out of range at {index}: {offsets}")
        out.append((code, offsets[0], offsets[1], k))
    return out


def build_filter(arch: str, pid: int, *, unix_sockets: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for `arch`, for a process whose id is `pid` (signals may aim
    at it only); `unix_sockets`: socket(AF_UNIX) allowed."""
    if arch not in SYSCALLS:
        raise ConfinementError(f"no seccomp filter for the {arch} architecture (x86_64 and aarch64 only)")
    nr = SYSCALLS[arch]
    program: list[_Instruction | str] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 0, "kill", AUDIT_ARCH[arch]),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == "x86_64":
        program.append((_JGE_K, "eperm", 0, X32_SYSCALL_BIT))

    def number(name: str) -> int:
        value = nr[name]
        assert value is not None, name
        return value

    program += [
        (_JEQ_K, "enosys", 0, number("clone3")),
        (_JEQ_K, "clone", 0, number("clone")),
        (_JEQ_K, "socket", 0, number("socket")),
        (_JEQ_K, "socketpair", 0, number("socketpair")),
        (_JEQ_K, "personality", 0, number("personality")),
        (_JEQ_K, "prlimit64", 0, number("prlimit64")),
        (_JEQ_K, "own_pid", 0, number("kill")),
        (_JEQ_K, "own_pid", 0, number("tgkill")),
        (_JEQ_K, "own_pid", 0, number("rt_sigqueueinfo")),
        (_JEQ_K, "own_pid", 0, number("rt_tgsigqueueinfo")),
    ]
    program += [(_JEQ_K, "eperm", 0, n) for n in (nr[name] for name in DENIED) if n is not None]
    program += [
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        # a thread (CLONE_THREAD), in no new namespace
        "clone",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_ALU_AND_K, 0, 0, CLONE_THREAD | CLONE_NAMESPACES),
        (_JEQ_K, "allow", "eperm", CLONE_THREAD),
        # socket(domain, type, protocol): AF_INET + SOCK_STREAM + (0 or IPPROTO_TCP), AF_UNIX if unix_sockets
        "socket",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow" if unix_sockets else "eperm", 0, socket.AF_UNIX),
        (_JEQ_K, 0, "eperm", socket.AF_INET),
        (_LD_W_ABS, 0, 0, _arg_low(1)),
        (_ALU_AND_K, 0, 0, 0xF),  # SOCK_NONBLOCK and SOCK_CLOEXEC sit above the type
        (_JEQ_K, 0, "eperm", socket.SOCK_STREAM),
        (_LD_W_ABS, 0, 0, _arg_low(2)),
        (_JEQ_K, "allow", 0, 0),
        (_JEQ_K, "allow", "eperm", IPPROTO_TCP),
        "socketpair",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", "eperm", socket.AF_UNIX),
        "personality",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", "eperm", PERSONALITY_QUERY),
        # prlimit64(pid, resource, new_limit, old_limit): reading only (new_limit NULL)
        "prlimit64",
        (_LD_W_ABS, 0, 0, _arg_low(2)),
        (_JEQ_K, 0, "eperm", 0),
        (_LD_W_ABS, 0, 0, _arg_high(2)),
        (_JEQ_K, "allow", "eperm", 0),
        # kill(pid, ...), tgkill(tgid, ...), rt_sigqueueinfo(pid, ...), rt_tgsigqueueinfo(tgid, ...): this process
        "own_pid",
        (_LD_W_ABS, 0, 0, _arg_low(0)),
        (_JEQ_K, "allow", "eperm", pid),
        "allow",
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        "eperm",
        (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM),
        "enosys",
        (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
        "kill",
        (_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
    ]
    return _assemble(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(arch: str | None = None, *, unix_sockets: bool = False) -> str:
    """Install the filter on the calling process, all its threads included (SECCOMP_FILTER_FLAG_TSYNC), after
    setting PR_SET_NO_NEW_PRIVS. `arch` defaults to the running one; another one is refused (its filter would
    kill the process at its next system call). `unix_sockets=True` allows socket(AF_UNIX), and with it every
    UNIX socket with a path on the machine (see the module's docstring). Returns "seccomp". Raises
    ConfinementError when the kernel refuses (no seccomp filters, or a thread under a different filter)."""
    running = machine()
    arch = arch or running
    if arch is None or arch != running:
        raise ConfinementError(f"cannot install a seccomp filter for {arch or os.uname().machine} on "
                               f"{os.uname().machine} (x86_64 and aarch64 processes only)")
    instructions = build_filter(arch, os.getpid(), unix_sockets=unix_sockets)
    blob = b"".join(struct.pack("=HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(blob, len(blob))
    prog = _SockFprog(len=len(instructions), filter=ctypes.cast(buffer, ctypes.c_void_p))
    try:
        set_no_new_privs()
    except OSError as exc:
        raise ConfinementError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {exc.strerror}", exc.errno) from None
    try:
        result = syscall(SYS_SECCOMP[arch], ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                         ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog))
    except OSError as exc:
        raise ConfinementError(f"seccomp(SECCOMP_SET_MODE_FILTER) failed: {exc.strerror}", exc.errno) from None
    if result != 0:  # with TSYNC, a positive result is the id of a thread that could not take the filter
        raise ConfinementError(f"seccomp: thread {result} is under another filter and cannot take this one")
    return "seccomp"
