"""A console or the runner serves the shell: while a console is open on a project, or `ratui up` runs it, the
shell's `ratui run`, `backfill`, `query`, `diff`, `merge` and `watch` run in that process, on its Engine and its warm
Spark, instead of in a warm engine of their own. One JVM for both, the commands start warm even when no engine ran
before, and the runs they start are the console's to show live, as its own runs are (the runner's: in its output).

It is the warm engine's door (host.py) on that process's side: the same socket in this user's private folder, the
same refusal of another user, the same lock (one server per project), the same fingerprint. What differs:

- it never stops its process: it serves until the console closes (the runner stops), or `ratui engine stop` (which
  stops the serving, not the console or the runner);
- a command from another environment (a PATH, a variable that differs) hands the serving to the engine that command
  starts, said once; the console (runner) takes it back once that engine has ended;
- when another engine already serves the project, it waits for that one to end (idle, stopped) and takes over;
- it does not renew itself or collect the JVM's heap between commands (the process's own runs may be going);
- its log is a file of its own (the console owns the terminal, the runner's output is its journal); closing the
  console with shell commands in flight asks first, then stops them as Ctrl-C would (the runner's SIGTERM stops
  them too).

    serving = ShellServing(root, engine_of, by="console").start()  # from a worker thread of the console's controller
    serving.commands()                                    # what the shell runs here now (quitting asks first)
    serving.stop(); serving.wait()                        # the console closes: served commands are cancelled
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ratui.warm import logfile, place as places, served, stdio
from ratui.warm.door import Host

CLAIM_SECONDS = 5.0  # how often a console whose project another engine serves looks whether it ended
HAND_OVER_SECONDS = 30.0  # how long a console that handed the serving over waits for the new engine to take it


class _NoCollection:
    """The process's JVM is not collected between shell commands: its own runs may be going."""

    def idle(self, in_flight: int, idle_seconds: float) -> None:
        pass

    def command_ended(self, in_flight: int) -> None:
        pass


BY = ("console", "runner")  # the processes that serve the shell beside their own work


class SharedHost(Host):
    """The warm engine's door, in a console's (or the runner's) process, on that process's Engine."""

    def __init__(self, place: places.Place, engine_of: Callable[[], Any], by: str) -> None:
        super().__init__(place, served.started_env())  # not os.environ now: Spark's start added to it
        self.engine_of = engine_of
        self.hosted_by = by
        self.heap = _NoCollection()  # type: ignore[assignment]
        self.idle_minutes = 0  # never idles out: it lives as long as the console

    def open_engine(self, root: Path):
        if root != self.place.project:
            from ratui.engine.errors import RatuiError

            raise RatuiError("RAT-ENG-002", f"this {self.hosted_by} serves {self.place.project}, not {root}")
        return self.engine_of()

    def tick(self) -> None:
        if not (self.place.project / "ratui.yaml").is_file():
            self.retire(f"the project {self.place.project} is gone")
            self.stopping.set()
        elif not self.in_flight and self.place.read_info() is None and not self.retired:
            try:
                self.write_info()
            except OSError as exc:
                served.log(f"the engine's info cannot be written: {exc.strerror}")
        if _LOG_FD and logfile.rotate(self.place.log, (_LOG_FD[0],)):
            served.log(f"the log was over {logfile.MAX_BYTES // 2**20} MiB: the older lines are in "
                       f"{logfile.older(self.place.log).name}")

    def renew_if_due(self) -> None:
        pass  # the process's memory is its own: serving the shell ends with it, never on a bound


_LOG_FD: list[int] = []


class ShellServing:
    """A console's (the runner's) serving of the shell, from its start to its end (or `ratui engine stop`)."""

    def __init__(self, root: Path, engine_of: Callable[[], Any], by: str = "console") -> None:
        if by not in BY:
            raise ValueError(f"by: one of {BY}")
        self.root = Path(root)
        self.engine_of = engine_of
        self.by = by
        self.host: SharedHost | None = None
        self.problem: str | None = None  # why it does not serve (the shell's commands are cold, the folder refused)
        self.closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ShellServing":
        """Serve now if the project's lock is free, else as soon as it is. Never raises: a refused folder or a
        turned-off warm engine is `problem`."""
        from ratui.engine.errors import RatuiError
        from ratui.warm import client

        why_off = client.warm_off(self.root)
        if why_off:
            self.problem = why_off
            return self
        try:
            self.place = places.place_of(self.root, places.engines_folder(create=True))
        except RatuiError as exc:
            self.problem = f"{exc.code} {exc.message}"
            return self
        self._thread = threading.Thread(target=self._serve, name=f"ratui-{self.by}-serves-the-shell", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self.closed.is_set():
            host = SharedHost(self.place, self.engine_of, self.by)
            if host.claim():
                try:
                    self._open_log()
                except OSError as exc:  # a full disk, a folder gone: the lock goes, the shell's commands run cold
                    host.retire(f"its log cannot be written: {exc.strerror}")
                    self.problem = f"the engine's log cannot be written: {exc.strerror}"
                    return
                stdio.install(None)
                from ratui.cli import common

                common.keep_engines_open(host.engine_for_command)
                try:
                    host.listen()
                except OSError as exc:
                    served.log(f"the {self.by} cannot serve the shell: {exc}")
                    host.retire(f"cannot listen: {exc.strerror}")
                    self.problem = f"its socket cannot be made: {exc.strerror}"
                    return
                self.host = host
                if self.closed.is_set():  # the console closed (the runner stopped) while this serving started
                    host.stop_all(signal.SIGTERM)
                served.log(f"the {self.by} (pid {os.getpid()}) serves the shell's commands on {self.place.socket}")
                try:
                    host.serve()
                finally:
                    host.retire(host.retired or f"the {self.by} stopped serving")
                    served.log(f"the {self.by} stopped serving the shell: {host.retired}")
                self.host = None
                if host.stopping.is_set():
                    return  # `ratui engine stop`, the project gone, the console closing: not again
                # a command from another environment: the engine it starts serves the shell (given time to take the
                # lock first); once that one ends, this console serves again
                self._wait_for_another(HAND_OVER_SECONDS)
                continue
            self.closed.wait(CLAIM_SECONDS)

    def _wait_for_another(self, timeout: float) -> None:
        """Until another engine has said it serves (its info written), the console closes, or `timeout`."""
        deadline = time.monotonic() + timeout
        while not self.closed.is_set() and time.monotonic() < deadline:
            info = self.place.read_info()
            if info and info.get("pid") != os.getpid():
                return
            self.closed.wait(0.2)

    def _open_log(self) -> None:
        if not _LOG_FD:
            fd = os.open(self.place.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            _LOG_FD.append(fd)
            served.log_to(fd)

    def serving(self) -> bool:
        host = self.host
        return host is not None and not host.retired

    def commands(self) -> list[str]:
        """The shell's commands running here now, as typed (`ratui watch`, ...)."""
        host = self.host
        if host is None:
            return []
        with host.lock:
            return ["ratui " + " ".join(one.argv) for one in host.in_flight.values()]

    def stop(self) -> None:
        """The console closes: no new command, and the commands in flight are cancelled (as by SIGTERM). Returns
        at once; `wait` waits for them (while the console's screen is still up, so their last words still reach
        their own terminals)."""
        self.closed.set()
        host = self.host
        if host is not None and not host.stopping.is_set():
            host.stop_all(signal.SIGTERM)

    def wait(self, timeout: float = 15.0) -> None:
        """After stop(): the cancelled commands end, within `timeout` seconds. Blocking: never on an event loop. Once
        the console's screen is gone too (it put back the streams it found), their last words still reach their own
        terminals: the streams are routed again."""
        stdio.reroute()
        if self._thread is not None:
            self._thread.join(timeout)
