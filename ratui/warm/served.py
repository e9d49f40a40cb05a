"""One command run by the warm engine: the client's argv parsed as `ratui` parses it, its paths taken from the
client's working folder, its prints on the client's own stdout and stderr, the client's Ctrl-C, SIGTERM and SIGHUP
delivered to it (and a client that went away counted as SIGHUP), its exit code sent back.

A command that listens for stop signals (`ratui run`: on_signal) cancels its own runs; any other is interrupted
with KeyboardInterrupt in its thread, as a cold process would be. A signal never reaches another command.
"""

from __future__ import annotations

import ctypes
import os
import sys
import signal
import socket
import threading
import time
from typing import Any, Callable

from ratui.warm import stdio
from ratui.warm.wire import Reader, WireError, send


class Served:
    def __init__(self, host: Any, conn: socket.socket, reader: Reader, message: dict, fds: list[int]) -> None:
        self.host = host
        self.conn = conn
        self.reader = reader
        self.argv: list[str] = [str(word) for word in message["command"]]
        self.cwd = str(message.get("cwd") or "/")
        self.client_pid = message.get("pid")
        self.began = time.time()
        self.engines: list[Any] = []
        self.listeners: list[Callable[[int], None]] = []
        self.thread_id: int | None = None
        self.done = threading.Event()
        self.signals: list[int] = []
        enc = message.get("encoding") or {}
        self.streams = stdio.Streams(
            stdin=_open(fds[0], "r", enc.get("stdin")), stdout=_open(fds[1], "w", enc.get("stdout")),
            stderr=_open(fds[2], "w", enc.get("stderr"), stderr=True), owner=self)

    def serve(self) -> None:
        host = self.host
        with host.lock:
            host.served_count += 1
            number = host.served_count
            host.in_flight[number] = self
            host.last_active = time.monotonic()
        answer: dict = {"exit": 1}
        log(f"command {number}: ratui {' '.join(self.argv)} (client pid {self.client_pid})")
        try:
            send(self.conn, {"accepted": {"pid": os.getpid(), "since": host.since, "commands": number}})
            self.thread_id = threading.get_ident()
            with stdio.serving(self.streams):
                threading.Thread(target=self.listen, name="ratui-engine-signals", daemon=True).start()
                answer = self.run()
        finally:
            self.done.set()
            self.streams.close()
            host.finished(number)
        log(f"command {number}: {answer} in {time.time() - self.began:.2f} s")
        try:
            send(self.conn, answer)
        except OSError:
            pass  # the client went away: its runs were cancelled
        host.renew_if_due()  # once the client has its exit code: the bounds cost it no time

    def run(self) -> dict:
        if not _COMMANDS:
            return {"refused": "this process runs no ratui command (its command line did not say how)"}
        parse, execute = _COMMANDS[0]
        try:
            args = parse(self.argv)
        except SystemExit as exc:  # a usage error or --help: what argparse printed, and its code
            return {"exit": exc.code if isinstance(exc.code, int) else 2}
        if getattr(args, "project", None) is not None:
            args.project = os.path.join(self.cwd, args.project)
        try:
            return {"exit": execute(args)}
        except Restart as exc:
            return {"restart": str(exc)}

    # ------------------------------------------------------------------------------------------ signals
    def on_signal(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """`listener(signum)` for each Ctrl-C, SIGTERM or SIGHUP of the client. Returns the removal."""
        self.listeners.append(listener)
        for signum in list(self.signals):  # one that came before the command listened
            listener(signum)

        def remove() -> None:
            if listener in self.listeners:
                self.listeners.remove(listener)

        return remove

    def listen(self) -> None:
        while not self.done.is_set():
            try:
                message, _ = self.reader.next()
            except (OSError, WireError):
                message = None
            if message is None:
                if not self.done.is_set():
                    self.signal(signal.SIGHUP)  # the client went away (killed, its terminal closed)
                return
            if isinstance(message.get("signal"), int):
                self.signal(message["signal"])

    def signal(self, signum: int) -> None:
        if self.done.is_set():
            return
        self.signals.append(signum)
        if self.listeners:
            for listener in list(self.listeners):
                listener(signum)
        elif len(self.signals) == 1 and self.thread_id is not None:
            # no listener: the command is stopped as a cold one would be, by KeyboardInterrupt in its thread
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id),
                                                       ctypes.py_object(KeyboardInterrupt))


def _open(fd: int, mode: str, encoding: Any, stderr: bool = False):
    name, errors = (encoding if isinstance(encoding, list) and len(encoding) == 2
                    else ("utf-8", "backslashreplace" if stderr else "strict"))
    try:
        tty = os.isatty(fd)
    except OSError:
        tty = False
    # a terminal and stderr are line-buffered, a pipe or a file block-buffered: as Python's own standard streams
    return open(fd, mode, buffering=1 if (tty or stderr) and mode == "w" else -1,  # noqa: SIM115 - Streams.close
                encoding=name, errors=errors, closefd=True)


# `ratui`'s own parse and execute (cli/main.py), handed down by the command line that started this process: the
# warm engine's main, or `ratui` opening a console that serves the shell (hosted.py). The command line is the top
# layer: nothing below it imports it.
_COMMANDS: list[tuple[Callable[[list[str]], Any], Callable[[Any], int]]] = []
_STARTED_ENV: list[dict[str, str]] = []


def commands_from(parse: Callable[[list[str]], Any], execute: Callable[[Any], int]) -> None:
    """Called once, as the process starts: also keeps its environment then (Spark adds to it once it starts), the
    one a command's must equal."""
    _COMMANDS[:] = [(parse, execute)]
    _STARTED_ENV[:] = [dict(os.environ)]


def started_env() -> dict[str, str]:
    return dict(_STARTED_ENV[0]) if _STARTED_ENV else dict(os.environ)


class Restart(BaseException):
    """The engine cannot run this command as it is now: the client starts a fresh one (a BaseException: no
    command's own `except Exception` may take it for a failure)."""


_LOG_FD: list[int] = []  # the log's own descriptor when the engine's stderr is not its log (the console's: hosted.py)


def log_to(fd: int) -> None:
    _LOG_FD[:] = [fd]


def log(text: str) -> None:
    """A line in the engine's log; a log that cannot be written (a full disk) never fails a command."""
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}"
    try:
        if _LOG_FD:
            os.write(_LOG_FD[0], (line + "\n").encode("utf-8", "backslashreplace"))
        else:
            print(line, file=sys.__stderr__, flush=True)
    except (OSError, ValueError):
        pass
