"""Unit tests kept off JVMs and servers, enforced rather than trusted (tests/kinds.py says which tests are unit).

While a unit test sets up and runs:

- this process may not spawn a JVM or a server: an audit hook (sys.addaudithook, process-wide, every thread) refuses
  `subprocess.Popen`, `os.posix_spawn` and `os.exec*` of `java`, Spark's launch scripts (`spark-submit`,
  `spark-class`, `sbin/*.sh`) and moto's S3 server, so PySpark's gateway, Nessie, a Spark master, worker or Connect
  server and moto all fail to start;
- a child process (`python -m ratui ...`) may not start one either: JAVA_HOME points at a tripwire, a `java` that
  writes who called it to a log and exits 127 (PySpark's launcher, ratui's data server and its class archive all
  take JAVA_HOME's java first);
- a JVM this process already runs (an earlier spark test's session in the same worker) is out of reach: ratui's
  Spark runtime (ratui.engine.spark.session.RUNTIME) is set aside for the test and put back after it, so a unit test
  that asks for Spark would have to start one (and is refused); a test that asks for a fixture whose setup started
  a JVM or server earlier in the run (`spark`, `nessie_uri`, ...) fails before it runs.

Whatever the code under test does with the refusal (a start on a thread may swallow it), the test fails: every
refusal is recorded and checked after setup and after the call. tests/test_kinds.py proves each way.
"""

from __future__ import annotations

import os
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

JVM_PROGRAMS = {"java", "spark-submit", "spark-class", "spark-shell", "pyspark", "spark-daemon.sh", "start-master.sh",
                "start-worker.sh", "start-connect-server.sh", "start-thriftserver.sh"}
SERVER_PROGRAMS = {"moto_server"}
SERVER_MODULES = {"moto.server"}  # `python -m moto.server`


def _words(args) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args]
    try:
        return [os.fsdecode(a) for a in args]
    except TypeError:
        return []


def what_starts(args) -> str | None:
    """'a JVM' or 'a server' when a command line starts one, else None. `args` is argv (or one program path)."""
    words = _words(args)
    if not words:
        return None
    names = [os.path.basename(w) for w in words[:3]]  # the program, or a shell or `python -m` in front of it
    if any(n in JVM_PROGRAMS for n in names):
        return "a JVM"
    if any(n in SERVER_PROGRAMS for n in names) or any(w in SERVER_MODULES for w in words[:4]):
        return "a server"
    return None


_NOTHING_SET_ASIDE = object()  # no unit test armed since the runtime was last put back


class Guard:
    """One per test process: armed for a unit test's setup and call, disarmed otherwise."""

    def __init__(self) -> None:
        self.armed = False
        self.refused: list[str] = []  # what the armed guard refused, since the last check
        self.fixture: list[str] = []  # the fixtures being set up now (innermost last)
        self.starting_fixtures: set[str] = set()  # fixtures whose setup started a JVM or a server, in this run
        self.tripwire: Path | None = None
        self._log_seen = 0
        self._saved_java_home: str | None = None
        self._saved_runtime: object = _NOTHING_SET_ASIDE  # what arm() set aside, until put back
        self._hooked = False

    # ---------------------------------------------------------------------------------------------- the hook

    def install(self, tripwire_dir: Path) -> None:
        self.tripwire = _make_tripwire(tripwire_dir)
        if not self._hooked:
            sys.addaudithook(self._audit)
            self._hooked = True

    def _audit(self, event: str, args: tuple) -> None:
        if event == "subprocess.Popen":
            argv = args[1] if args[1] is not None else args[0]
        elif event in ("os.posix_spawn", "os.exec"):
            argv = args[1] if len(args) > 1 else args[0]
        else:
            return
        started = what_starts(argv)
        if started is None:
            return
        if self.fixture:
            self.starting_fixtures.update(self.fixture)
        if self.armed:
            import threading

            command = " ".join(_words(argv))[:200]
            self.refused.append(f"started {started} in the test's process (thread {threading.current_thread().name}): "
                                f"{command}")
            raise PermissionError(f"a unit test may not start {started} (tests/kinds.py): {command}")

    # ---------------------------------------------------------------------------------------------- arming

    def arm(self) -> None:
        assert self.tripwire is not None, "Guard.install() first"
        self.armed = True
        self._saved_java_home = os.environ.get("JAVA_HOME")
        os.environ["JAVA_HOME"] = str(self.tripwire)
        self._log_seen = _log_size(self.tripwire)
        self._saved_runtime = _set_runtime_aside()

    def disarm(self) -> None:
        if not self.armed:
            return
        self.armed = False
        if self._saved_java_home is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = self._saved_java_home

    def put_runtime_back(self) -> None:
        """ratui's Spark runtime as it was before the unit test: after its fixtures' teardown, since a fixture that
        monkeypatched the runtime restores what it saw (the set-aside state) when it is undone."""
        if self._saved_runtime is _NOTHING_SET_ASIDE:
            return
        _put_runtime_back(self._saved_runtime)
        self._saved_runtime = _NOTHING_SET_ASIDE

    def take_refusals(self) -> list[str]:
        """What was refused since the last call (in this process, and by the tripwire in any child), then forgotten."""
        found, self.refused = self.refused, []
        if self.tripwire is not None:
            log = self.tripwire / "calls.log"
            if log.exists():
                with open(log, "rb") as f:
                    f.seek(self._log_seen)
                    calls = f.read().decode(errors="replace")
                    self._log_seen = f.tell()
                found += [f"a child process started java: {line}" for line in calls.splitlines() if line]
        return found

    def held_fixtures(self, fixturenames) -> list[str]:
        """Of a test's fixtures, those whose setup started a JVM or a server earlier in this run: a unit test using
        one would use that JVM or server without starting it."""
        return sorted(self.starting_fixtures & set(fixturenames))

    @contextmanager
    def setting_up(self, fixture: str) -> Iterator[None]:
        self.fixture.append(fixture)
        try:
            yield
        finally:
            self.fixture.pop()


def _make_tripwire(folder: Path) -> Path:
    """A JAVA_HOME whose bin/java records its command line in calls.log and refuses to run."""
    home = folder / "jvm-tripwire"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    java = home / "bin" / "java"
    log = home / "calls.log"
    java.write_text("#!/bin/sh\n"
                    f"printf '%.300s\\n' \"$0 $*\" >> '{log}'\n"
                    "echo \"ratui's tests: a unit test's child process tried to start Java; a test that needs a JVM "
                    "is marked spark or server in tests/kinds.py\" >&2\n"
                    "exit 127\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return home


def _log_size(home: Path) -> int:
    try:
        return (home / "calls.log").stat().st_size
    except OSError:
        return 0


def _set_runtime_aside() -> dict | None:
    """ratui's Spark runtime as if this process had started none; its state, to put back. None when the module is not
    imported (nothing to set aside: a runtime made during the test is reset after it)."""
    module = sys.modules.get("ratui.engine.spark.session")
    if module is None:
        return None
    runtime = module.RUNTIME
    saved = dict(vars(runtime))
    runtime.__init__()
    return saved


def _put_runtime_back(saved: dict | None) -> None:
    module = sys.modules.get("ratui.engine.spark.session")
    if module is None:
        return
    runtime = module.RUNTIME
    vars(runtime).clear()
    if saved is None:
        runtime.__init__()  # whatever a unit test left (a refused start, say) must not reach the next test
    else:
        vars(runtime).update(saved)


GUARD = Guard()
