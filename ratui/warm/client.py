"""`ratui COMMAND` through the project's warm engine: find it (or start it, announced once), hand it the command
with this process's stdin, stdout and stderr, forward Ctrl-C, SIGTERM and SIGHUP to it, and exit with its code.

Every wait is bounded: a connect (CONNECT_SECONDS), the engine's answer (ANSWER_SECONDS, or
$RATUI_ENGINE_ANSWER_SECONDS), a start (START_SECONDS). An engine that takes no connection or never answers is
wedged: it is killed with its JVM, and replaced. A stale socket (its engine died) is replaced by a fresh engine.
When no engine can be had (its folder is not private or cannot be written, it cannot start), the command runs in
this process as it would with --no-warm, and says why on stderr. Light on purpose: no PySpark, no engine.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ratui.engine.errors import RatuiError
from ratui.warm import logfile, place as places
from ratui.warm.wire import Reader, WireError, send

CONNECT_SECONDS = 5.0
ANSWER_SECONDS = 20.0
START_SECONDS = 90.0
OFF_WORDS = ("0", "false", "no", "off")
GONE_SECONDS = 10.0  # a killed engine's end, before a fresh one takes its lock


def answer_seconds() -> float:
    """How long a command waits for its engine's answer: $RATUI_ENGINE_ANSWER_SECONDS (seconds, > 0), else
    ANSWER_SECONDS."""
    try:
        seconds = float(os.environ.get("RATUI_ENGINE_ANSWER_SECONDS", ""))
    except ValueError:
        return ANSWER_SECONDS
    return seconds if 0 < seconds < 86400 else ANSWER_SECONDS


def run_warm(words: list[str], project: str, as_json: bool) -> int | None:
    """The command's exit code, run by the warm engine; None: run it in this process. With no engine running,
    this command runs in its own process and starts the engine beside it, announced: the engine starts its Spark
    once this command has ended (two JVMs starting at once would slow both), and the next commands use it."""
    if os.environ.get("RATUI_WARM", "1").strip().lower() in OFF_WORDS:
        return None
    root = _project_root(project)
    if root is None or not _warm_in(root):
        return None  # a folder with no ratui.yaml: the command's own error says so
    try:
        place = places.place_of(root)
        fingerprint = places.fingerprint()
        for _attempt in range(2):
            sock = _connect(place)
            if sock is None:
                break
            reader = Reader(sock)  # one per connection: the exit may come in the same read as the answer
            answer = _hand_over(sock, reader, words, place, fingerprint)
            if answer is None or "restart" in answer:
                sock.close()
                if answer is not None:
                    _say(f"this project's warm engine is replaced: {answer['restart']}")
                continue
            if "refused" in answer:
                sock.close()
                raise RatuiError("RAT-ENG-002", f"the warm engine refused the command: {answer['refused']}",
                                 file=str(place.socket), hint=_COLD_HINT)
            code = _wait_for_exit(sock, reader, place)
            if code is not None:
                return code  # else the engine could not run it as it is now: a fresh one takes it
        note = place.take_note()
        if note is not None:
            _say(f"this project's warm engine (pid {note.get('pid')}) renewed itself after its last command: "
                 f"{note.get('why')}")
        pid = start_beside(place)
        if pid is not None:
            _say(f"this project's warm engine starts beside this command (pid {pid}; its Spark once the command "
                 f"ends): the next `ratui run`, `backfill`, `query`, `diff`, `merge` and `watch` use it; it stops "
                 f"after {_idle_minutes(root)} idle minute(s), or with `ratui engine stop`")
    except RatuiError as exc:
        print(exc.render(), file=sys.stderr)
        _say("this command runs in its own process")
    return None


_COLD_HINT = "`ratui engine logs` shows what the engine said; --no-warm (or RATUI_WARM=0) runs without it."


def _project_root(project: str) -> Path | None:
    start = Path(project).resolve()
    for folder in (start, *start.parents):
        if (folder / "ratui.yaml").is_file():
            return folder
    return None


def _engine_section(root: Path) -> dict:
    """ratui.yaml's engine section as written ({} when there is none, or the file is malformed: the command
    reports that)."""
    try:
        import yaml

        data = yaml.safe_load((root / "ratui.yaml").read_text(encoding="utf-8"))
        section = data.get("engine") if isinstance(data, dict) else None
        return section if isinstance(section, dict) else {}
    except Exception:
        return {}


def _warm_in(root: Path) -> bool:
    return _engine_section(root).get("warm") is not False


def warm_off(root: Path) -> str | None:
    """What keeps the project's commands out of its warm engine (RATUI_WARM=0, `engine.warm: false`), or None."""
    if os.environ.get("RATUI_WARM", "1").strip().lower() in OFF_WORDS:
        return "RATUI_WARM=0"
    return None if _warm_in(root) else "engine.warm: false in ratui.yaml"


def _idle_minutes(root: Path) -> int:
    minutes = _engine_section(root).get("idle_minutes")
    return minutes if isinstance(minutes, int) and not isinstance(minutes, bool) and minutes > 0 else 15


# ---------------------------------------------------------------------------------------------- reaching it
def start_beside(place: places.Place, after_pid: int | None = None) -> int | None:
    """Start the project's engine in the background; its pid, or None when another command is starting it."""
    try:
        fd = os.open(str(place.lock), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _unwritable(place, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # another command is starting it
        sock = _connect(place)
        if sock is not None:  # started meanwhile
            sock.close()
            return None
        place.socket.unlink(missing_ok=True)  # a dead engine's
        return _start(place, os.getpid() if after_pid is None else after_pid).pid
    finally:
        os.close(fd)


def reach(place: places.Place) -> tuple[socket.socket, bool]:
    """A connection to the project's engine, started now (Spark at once) if none runs; and whether this call
    started it."""
    sock = _connect(place)
    if sock is not None:
        return sock, False
    process_pid = start_beside(place, after_pid=0)
    deadline = time.monotonic() + START_SECONDS
    while True:
        sock = _connect(place)
        if sock is not None:
            return sock, process_pid is not None
        if process_pid is not None and not _alive(process_pid):
            raise RatuiError("RAT-ENG-003", f"the warm engine did not start: {_last_line(place.log)}",
                             file=str(place.log), hint=_COLD_HINT)
        if time.monotonic() > deadline:
            raise RatuiError("RAT-ENG-003", f"the warm engine did not listen within {START_SECONDS:.0f} s",
                             file=str(place.log), hint=_COLD_HINT)
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        finished, _status = os.waitpid(pid, os.WNOHANG)
        return finished == 0
    except ChildProcessError:
        return _is_engine(pid)


def _connect(place: places.Place) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_SECONDS)
    try:
        with places.reachable(place.socket) as name:
            sock.connect(name)
        return sock
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except socket.timeout:  # its queue of connections full: it takes none
        sock.close()
        _end_wedged(place, f"took no connection in {CONNECT_SECONDS:g} s")
        return None
    except OSError as exc:
        sock.close()
        raise RatuiError("RAT-ENG-003", f"the warm engine's socket {place.socket} cannot be reached: {exc.strerror}",
                         file=str(place.socket), hint=_COLD_HINT) from None


def _start(place: places.Place, after_pid: int) -> subprocess.Popen:
    """The engine process, its output in its log; it starts Spark once `after_pid` has ended (0: at once). A folder
    where the log cannot be written (a full disk) starts none: RAT-ENG-003."""
    logfile.rotate(place.log)  # an engine's log is bounded: one older file kept
    try:
        log = open(place.log, "ab")  # noqa: SIM115 - closed below, once the engine has it
        os.chmod(place.log, 0o600)
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} started by the command of pid {os.getpid()}\n".encode())
        log.flush()  # a full disk says so here, not in an engine that would die unseen
    except OSError as exc:
        raise _unwritable(place, exc) from None
    with log:
        return subprocess.Popen([sys.executable, "-m", "ratui.warm.host", str(place.project), str(after_pid)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(place.project),
                                start_new_session=True, close_fds=True)


def _unwritable(place: places.Place, exc: OSError) -> RatuiError:
    return RatuiError("RAT-ENG-003", f"the warm engine cannot start: its folder {place.folder} cannot be written "
                      f"({exc.strerror})", file=str(place.folder),
                      hint="Make room in that folder (or set RATUI_ENGINE_DIR to another one); the command runs in "
                      "its own process meanwhile.")


def _hand_over(sock: socket.socket, reader: Reader, words: list[str], place: places.Place,
               fingerprint: str) -> dict | None:
    """Send the command; the engine's answer (None: it went away, or never answered and was ended)."""
    fds, opened = _standard_fds()
    try:
        send(sock, {"command": words, "cwd": os.getcwd(), "env": dict(os.environ), "pid": os.getpid(),
                    "fingerprint": fingerprint, "project": str(place.project),
                    "encoding": {name: [getattr(sys, name).encoding or "utf-8", getattr(sys, name).errors or "strict"]
                                 for name in ("stdin", "stdout", "stderr") if getattr(sys, name, None) is not None}},
             fds)
        sock.settimeout(answer_seconds())
        answer, _ = reader.next()
        sock.settimeout(None)
        return answer
    except socket.timeout:
        _end_wedged(place, f"did not answer in {answer_seconds():g} s")
        return None
    except (OSError, WireError):
        return None
    finally:
        for fd in opened:
            os.close(fd)


def _standard_fds() -> tuple[list[int], list[int]]:
    """This process's stdin, stdout and stderr (a closed one is handed over as /dev/null)."""
    fds, opened = [], []
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            null = os.open(os.devnull, mode)
            opened.append(null)
            fds.append(null)
    return fds, opened


def _end_wedged(place: places.Place, what: str) -> None:
    """An engine that took no connection, or accepted one and did not answer in answer_seconds(): killed with the
    processes it started (its JVM), so a fresh one starts; waited for (bounded), so that the fresh one finds its
    lock free."""
    info = place.read_info() or {}
    pid = info.get("pid")
    if isinstance(pid, int) and _is_engine(pid):
        _say(f"the warm engine (pid {pid}) {what}: ending it and its JVM")
        for one in [pid, *_children(pid)]:
            try:
                os.kill(one, signal.SIGKILL)
            except OSError:
                pass
        wait_until_gone(pid, GONE_SECONDS)
    place.socket.unlink(missing_ok=True)
    place.info.unlink(missing_ok=True)


def _children(pid: int) -> list[int]:
    try:
        import psutil

        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except Exception:  # psutil missing, or the engine gone meanwhile
        return []


def _is_engine(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return os.stat(f"/proc/{pid}").st_uid == os.getuid() and b"ratui.warm.host" in command
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- while it runs
def _wait_for_exit(sock: socket.socket, reader: Reader, place: places.Place) -> int | None:
    """The command's exit code; None when the engine answered that a fresh engine must run it (said here)."""
    received: list[int] = []

    def forward(signum: int, _frame) -> None:
        received.append(signum)
        if len(received) > 1:  # a second signal stops this command at once, as without the engine
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        try:
            send(sock, {"signal": signum})
        except OSError:
            pass

    previous = {number: signal.signal(number, forward) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                message, _ = reader.next()
            except (OSError, WireError):
                message = None
            if message is None:
                raise RatuiError("RAT-ENG-004", "the warm engine ended during the command",
                                 file=str(place.log), hint="Its runs are recorded as failed by the next command; "
                                 "main is unchanged. `ratui engine logs` shows what it said last.")
            if "exit" in message:
                return int(message["exit"])
            if "restart" in message:
                _say(f"this project's warm engine is replaced: {message['restart']}")
                return None
    except RatuiError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        sock.close()


def _say(text: str) -> None:
    print(f"ratui: {text}", file=sys.stderr, flush=True)


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else "it printed nothing"
    except OSError:
        return "it left no log"


# ---------------------------------------------------------------------------------------------- ratui engine
def ask(place: places.Place, message: dict) -> dict | None:
    """The running engine's answer to a status or stop message; None when no engine runs for the project."""
    sock = _connect(place)
    if sock is None:
        return None
    try:
        send(sock, message)
        sock.settimeout(answer_seconds())
        answer, _ = Reader(sock).next()
        return answer
    except (OSError, WireError):
        return None
    finally:
        sock.close()


def api_call(root: Path, message: dict) -> tuple[dict, int] | None:
    """A Python API call answered by the project's running engine (or the console serving the shell), with the
    descriptor its rows were written to, at its start; None when none runs or may be used (one is never started
    for it: the caller queries in its own process). Waits as long as the query runs; an interrupt (KeyboardInterrupt)
    closes the connection, and the engine cancels the query."""
    if warm_off(root):
        return None
    try:
        place = places.place_of(root)
        sock = _connect(place)
    except RatuiError:
        return None
    if sock is None:
        return None
    fd = os.memfd_create("ratui-api-rows", os.MFD_CLOEXEC)
    try:
        send(sock, {**message, "project": str(place.project), "fingerprint": places.fingerprint(),
                    "pid": os.getpid()}, [fd])
        reader = Reader(sock)
        sock.settimeout(answer_seconds())
        answer, _ = reader.next()
        if not answer or "accepted" not in answer:
            os.close(fd)
            return None
        sock.settimeout(None)  # a query runs as long as it runs
        answer, _ = reader.next()
        if not answer:
            os.close(fd)
            return None
        os.lseek(fd, 0, os.SEEK_SET)
        return answer, fd
    except (OSError, WireError):
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    finally:
        sock.close()


def start(place: places.Place) -> tuple[int | None, bool]:
    """Start the project's engine unless it runs: (its pid, whether this call started it)."""
    sock, started = reach(place)
    sock.close()
    return (place.read_info() or {}).get("pid"), started


def wait_until_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _is_engine(pid):
            return True
        time.sleep(0.05)
    return False
