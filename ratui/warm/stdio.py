"""In the warm engine, every command has its own stdin, stdout and stderr (its client's), and the process has one
sys.stdout: a router that sends each thread's writes to the streams of the command that thread works for. A thread
a command starts (a pool's worker, a run's thread) works for that command too; any other thread writes to the
engine's log.

    install(log)                      once, in the engine process
    with serving(streams): ...        the current thread (and the threads it starts) works for a command
    own("stderr")                     the stream the current thread's command writes to (None outside a command)
    current()                         the current thread's command's streams, and the command (owner)
"""

from __future__ import annotations

import io
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TextIO


@dataclass
class Streams:
    stdin: TextIO
    stdout: TextIO
    stderr: TextIO
    owner: Any = None  # the command they belong to (served.Served)

    def close(self) -> None:
        for stream in (self.stdout, self.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for stream in (self.stdin, self.stdout, self.stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


_routes: dict[int, Streams] = {}
_installed = False
_routers: list["_Router"] = []  # sys.stdin, sys.stdout and sys.stderr while installed


def current() -> Streams | None:
    """The streams of the command the current thread works for (None outside a command)."""
    return _routes.get(threading.get_ident())


def own(name: str) -> TextIO | None:
    streams = _routes.get(threading.get_ident())
    return getattr(streams, name) if streams is not None else None


@contextmanager
def serving(streams: Streams) -> Iterator[None]:
    me = threading.get_ident()
    _routes[me] = streams
    try:
        yield
    finally:
        _routes.pop(me, None)


class _Router(io.TextIOBase):
    """sys.stdin, sys.stdout or sys.stderr of the engine process."""

    def __init__(self, name: str, fallback: TextIO) -> None:
        self._name = name
        self._fallback = fallback

    def _stream(self) -> TextIO:
        return own(self._name) or self._fallback

    def write(self, text: str) -> int:  # type: ignore[override]
        return self._stream().write(text)

    def writelines(self, lines) -> None:  # type: ignore[override]
        self._stream().writelines(lines)

    def flush(self) -> None:
        self._stream().flush()

    def read(self, size: int | None = -1) -> str:  # type: ignore[override]
        return self._stream().read(size)

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        return self._stream().readline(size)

    def isatty(self) -> bool:
        return self._stream().isatty()

    def fileno(self) -> int:
        return self._stream().fileno()

    def readable(self) -> bool:
        return self._stream().readable()

    def writable(self) -> bool:
        return self._stream().writable()

    def __iter__(self):
        return iter(self._stream())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream().encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._stream().errors

    @property
    def buffer(self) -> Any:
        return self._stream().buffer

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return False


def install(log: TextIO | None) -> Callable[[], None]:
    """Route the process's standard streams by thread, and let a thread inherit the command of the thread that
    starts it; the other threads write to `log` (None: where they wrote before, e.g. the console's own capture).
    Returns the undoing of it."""
    global _installed
    if _installed:
        return lambda: None
    _installed = True
    before = (sys.stdin, sys.stdout, sys.stderr)
    sys.stdin = _Router("stdin", io.StringIO() if log is not None else sys.stdin)  # type: ignore[assignment]
    sys.stdout = _Router("stdout", log or sys.stdout)  # type: ignore[assignment]
    sys.stderr = _Router("stderr", log or sys.stderr)  # type: ignore[assignment]
    _routers[:] = [sys.stdin, sys.stdout, sys.stderr]  # type: ignore[list-item]
    original_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        streams = _routes.get(threading.get_ident())
        if streams is not None:
            run = thread.run

            def run_for_the_command() -> None:
                with serving(streams):
                    run()

            thread.run = run_for_the_command  # type: ignore[method-assign]
        original_start(thread)

    threading.Thread.start = start  # type: ignore[method-assign]

    def uninstall() -> None:
        global _installed
        sys.stdin, sys.stdout, sys.stderr = before
        _routers.clear()
        threading.Thread.start = original_start  # type: ignore[method-assign]
        _installed = False

    return uninstall


def reroute() -> None:
    """The routers made the standard streams again, if something put others in their place since (a Textual App
    that ended restores the streams it found when it started); the others become the fallbacks."""
    if not _routers:
        return
    for name, router in zip(("stdin", "stdout", "stderr"), _routers):
        now = getattr(sys, name)
        if now is not router:
            router._fallback = now
            setattr(sys, name, router)
