"""The fork server: a warm template a confined child is forked from, instead of a fresh interpreter per run.

`python -I -X utf8 -m ratui.engine.isolation.fork_server PARENT_PID` (started by this module's ForkServer, one per
ratui process) imports what a pipeline's child needs - PySpark's Connect client, pyarrow, pandas, ratui's child
and its confinement - and nothing else: no user code ever runs in it, it has connected to nothing, and its
environment is the children's allow-list (limits.child_environment: no credentials). It then waits on one
SOCK_SEQPACKET socket (fd 3) for ratui's requests and forks one child per request. Right after the fork the child
takes the run's standard streams and report pipe (passed with the request), closes every other descriptor (the
template's socket included: a child cannot send the template anything), starts its own session, sets the run's
environment, and runs child.main(): the same steps in the same order as an exec'd child - die with its parent
(the template, which dies with ratui), limits, Landlock while it has one thread, seccomp on every thread, then
the user's code. Only then can user code run, inside a domain the template is outside of: Landlock's scoping
refuses its signals to the template and to other children (each child is its own domain), seccomp refuses
ptrace, kill of another pid and process_vm_*, and Landlock refuses ptrace of a process outside the domain.

The template reaps its children and tells ratui each one's exit status; ratui ends a child with killpg(SIGKILL)
as it does an exec'd one. The jail level keeps the exec'd child (bubblewrap builds its namespaces at exec), and
the process level too (nothing there stops a child from signalling or tracing the template).
"""

from __future__ import annotations

import array
import atexit
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("ratui.isolation")

READY_SECONDS = 60.0  # the template's imports, on a busy machine
FORK_SECONDS = 10.0  # a fork's answer
MESSAGE_BYTES = 1 << 16
REPORT_FD = 3  # the report pipe's number in a forked child


class ForkedChild:
    """A forked child as runner.py uses a Popen: pid, stdin, stdout, poll(), wait(timeout), returncode."""

    def __init__(self, pid: int, stdin, stdout):
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._ended = threading.Event()

    def ended(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """ratui's side: the template's process, its socket, and the children it forked that have not ended."""

    def __init__(self, folder: Path):
        self.folder = folder  # its HOME and TMPDIR (it writes nothing there), and its log
        self.pid: int | None = None
        self.error: str | None = None
        self._sock: socket.socket | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()  # one request at a time: the template answers in order
        self._answers: list[dict[str, Any]] = []
        self._answered = threading.Condition()
        self._children: dict[int, ForkedChild] = {}
        self._early_exits: dict[int, int] = {}

    def start(self) -> None:
        """Start the template in the background (its thread lives as long as it: PR_SET_PDEATHSIG is per thread)."""
        threading.Thread(target=self._keep, name="ratui-fork-server", daemon=True).start()

    def ready(self, timeout: float = READY_SECONDS) -> bool:
        return self._ready.wait(timeout) and self.error is None and self._sock is not None

    def _keep(self) -> None:
        from ratui.engine.isolation.limits import child_environment

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.folder, 0o700)
            with open(self.folder / "fork-server.log", "ab") as out:
                process = subprocess.Popen(
                    [sys.executable, "-I", "-X", "utf8", "-m", "ratui.engine.isolation.fork_server",
                     str(os.getpid()), str(theirs.fileno())], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    cwd=str(self.folder), env=child_environment(os.environ, self.folder), pass_fds=(theirs.fileno(),),
                    start_new_session=True)
        except OSError as exc:
            self.error = f"the fork server could not be started: {exc}"
            self._ready.set()
            return
        finally:
            theirs.close()
        self.pid = process.pid
        try:
            self._listen(ours)
        finally:
            self.error = self.error or "the fork server ended"
            self._sock = None
            self._ready.set()
            ours.close()
            try:
                process.kill()
            except OSError:
                pass
            process.wait()
            for child in list(self._children.values()):  # they died with it (PR_SET_PDEATHSIG)
                child.ended(-9)
            with self._answered:
                self._answered.notify_all()

    def _listen(self, sock: socket.socket) -> None:
        while True:
            data = sock.recv(MESSAGE_BYTES)
            if not data:
                return
            message = json.loads(data)
            if "ready" in message:
                self._sock = sock
                self._ready.set()
            elif "exit" in message:
                pid, code = int(message["exit"]), int(message["code"])
                child = self._children.pop(pid, None)
                if child is not None:
                    child.ended(code)
                else:
                    self._early_exits[pid] = code
            else:
                with self._answered:
                    self._answers.append(message)
                    self._answered.notify_all()

    def fork(self, env: dict[str, str], report_fd: int) -> ForkedChild:
        """A child forked from the template, its stdin and stdout pipes ours; `report_fd` (the write end of the
        report pipe) becomes its fd 3. Raises OSError when the template cannot answer."""
        if not self.ready(0):
            raise OSError(self.error or "the fork server is not ready")
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            with self._lock:
                sock = self._sock
                if sock is None:
                    raise OSError(self.error or "the fork server ended")
                fds = array.array("i", [stdin_r, stdout_w, report_fd])
                sock.sendmsg([json.dumps({"env": env}).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                answer = self._answer()
                pid = int(answer["pid"])
                child = ForkedChild(pid, os.fdopen(stdin_w, "wb"), os.fdopen(stdout_r, "rb"))
                self._children[pid] = child
                if pid in self._early_exits:
                    self._children.pop(pid)
                    child.ended(self._early_exits.pop(pid))
                return child
        except BaseException:
            for fd in (stdin_w, stdout_r):
                _close(fd)
            raise
        finally:
            for fd in (stdin_r, stdout_w):
                _close(fd)

    def _answer(self) -> dict[str, Any]:
        deadline = time.monotonic() + FORK_SECONDS
        with self._answered:
            while not self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self._sock is None:
                    raise OSError(self.error or "the fork server did not answer")
                self._answered.wait(left)
            answer = self._answers.pop(0)
        if "pid" not in answer:
            raise OSError(f"the fork server could not fork: {answer.get('error')}")
        return answer

    def stop(self) -> None:
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # the template reads EOF and ends; _keep reaps it
            except OSError:
                pass
        if self.pid is not None:
            try:
                os.killpg(self.pid, 9)
            except OSError:
                pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


_server: list[ForkServer] = []
_server_lock = threading.Lock()


def server(state_dir: Path) -> ForkServer:
    """This process's fork server, started on first use (and again when it ended)."""
    with _server_lock:
        current = _server[0] if _server else None
        if current is not None and (current.error is None):
            return current
        current = ForkServer(state_dir / "isolation" / "template")
        current.start()
        _server[:] = [current]
        return current


def stop_all() -> None:
    with _server_lock:
        for current in _server:
            current.stop()
        _server.clear()


atexit.register(stop_all)


# ------------------------------------------------------------------------------------------ the template


def _warm() -> None:
    """What every child imports (child.py's steps 3 and 4), imported once here, before any confinement."""
    import pyspark.sql.connect.session  # noqa: F401
    from pyspark.sql import SparkSession, functions, types, window  # noqa: F401
    from pyspark.sql.connect.dataframe import DataFrame  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import pandas  # noqa: F401
    from ratui.engine.iceberg import file_scan  # noqa: F401
    from ratui.engine.isolation import child, landlock, limits, seccomp  # noqa: F401


def template(parent: int, fd: int) -> int:
    from ratui.engine.isolation import limits

    limits.die_with_parent(parent)
    sock = socket.socket(fileno=fd)
    try:
        _warm()
    except ImportError as exc:  # each child imports again and reports it
        print(f"fork server: {exc}", flush=True)
    import gc
    import select

    gc.collect()
    gc.freeze()  # what the template holds stays shared with its children (no copy-on-write by the collector)
    sock.send(json.dumps({"ready": os.getpid()}).encode())
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        readable, _, _ = select.select([sock.fileno(), *children], [], [])
        for ready in readable:
            if ready == sock.fileno():
                if not _request(sock, children):
                    return 0
            else:
                pid = children.pop(ready)
                os.close(ready)
                _, status = os.waitpid(pid, 0)
                sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _request(sock: socket.socket, children: dict[int, int]) -> bool:
    """One request: fork a child with the passed descriptors; False when ratui closed the socket."""
    data, ancillary, _flags, _addr = sock.recvmsg(MESSAGE_BYTES, socket.CMSG_SPACE(3 * 4))
    if not data:
        return False
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    request = json.loads(data)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"error": f"{len(fds)} descriptors passed, not 3"}).encode())
        return True
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:
        pid = -1
        sock.send(json.dumps({"error": str(exc)}).encode())
    if pid == 0:
        _child(sock, list(fds), request["env"])  # never returns
    for fd in fds:
        os.close(fd)
    if pid > 0:
        children[os.pidfd_open(pid)] = pid
        sock.send(json.dumps({"pid": pid}).encode())
    return True


def _child(sock: socket.socket, fds: list[int], env: dict[str, str]) -> None:
    """In the forked child: its streams, nothing else of the template's, its own session, then child.py."""
    code = 70
    try:
        sock.close()  # fd 3: the template's socket, gone before fd 3 becomes the report pipe
        stdin, stdout, report = fds
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stdout, 2)
        os.dup2(report, REPORT_FD)
        os.closerange(REPORT_FD + 1, os.sysconf("SC_OPEN_MAX"))
        os.setsid()
        os.environ.clear()
        os.environ.update(env)
        from ratui.engine.isolation import child

        code = child.main()
        child._end(code)
    finally:
        os._exit(code)


if __name__ == "__main__":
    sys.exit(template(int(sys.argv[1]), int(sys.argv[2])))
