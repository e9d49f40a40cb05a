"""The warm engine's door: the Host of one project's engine (its process is host.py; a console serving the shell
runs one too, hosted.py).

It listens on the project's socket in this user's private folder (place.py), refuses a peer of another user (the
kernel says who connected), and runs each command it is handed on a thread of its own with the command's stdin,
stdout and stderr, through the same command functions as a cold `ratui` (served.py). Spark starts as soon as the
engine does, and stays. It keeps one opened Engine per ratui.yaml (a ratui.yaml edited between commands opens a new
one; a change to its Spark settings, to ratui or to the environment retires this engine: the command is told to
start a fresh one). It renews itself (takes no new command, ends once its commands in flight have; the next command
starts a fresh one, and says why) when its process and its JVM use more than `engine.max_memory_mb` or it has
served `engine.max_commands` commands, and keeps its log bounded (logfile.py). It stops after
`engine.idle_minutes` with no command, on `ratui engine stop`, on SIGTERM (the runs in flight are cancelled first),
and when its project folder is gone. Only one engine per project runs: a
second one started finds the first one's lock taken and exits.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ratui.warm import heap, logfile, place as places, stdio
from ratui.warm.served import Restart, Served, log
from ratui.warm.wire import Reader, WireError, send

TICK_SECONDS = 1.0  # how often the engine looks at its idle time and its project


class Host:
    def __init__(self, place: places.Place, started_env: dict[str, str]) -> None:
        self.place = place
        self.env = started_env
        self.fingerprint = places.fingerprint(started_env)
        self.since = time.time()
        self.lock = threading.RLock()  # also taken by the signal handler, on the main thread that may hold it
        self.in_flight: dict[int, Any] = {}  # command number -> served.Served
        self.served_count = 0
        self.last_active = time.monotonic()
        self.listener: socket.socket | None = None
        self.socket_inode: int | None = None
        self.alive_lock: int | None = None
        self.retired: str | None = None  # why no new command is taken
        self.stopping = threading.Event()
        self.engines: dict[str, Any] = {}  # ratui.yaml digest -> Engine
        self.stale: list[Any] = []  # Engines of an older ratui.yaml
        self.spark_key: tuple | None = None
        self.idle_minutes = 15
        self.heap = heap.Collector(_collect_garbage, log)  # the JVM's heap collected between commands
        self.max_memory_mb = 3072  # engine.max_memory_mb, engine.max_commands: the project's, once read
        self.max_commands = 500
        self.hosted_by: str | None = None  # "console" or "runner": a process of its own serving the shell (hosted.py)

    # ------------------------------------------------------------------------------------------ life
    def claim(self) -> bool:
        """Take the project's engine lock; False when another engine of the project holds it."""
        fd = os.open(str(self.place.folder / f"{self.place.key}.alive"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.alive_lock = fd
        return True

    def listen(self) -> None:
        temporary = self.place.folder / f"{self.place.key}.{os.getpid()}.sock"
        temporary.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with places.reachable(temporary) as name:
            listener.bind(name)
        os.chmod(temporary, 0o600)
        listener.listen(16)
        listener.settimeout(TICK_SECONDS)
        self.write_info()  # before the socket: whoever connects can read what it reached
        os.replace(temporary, self.place.socket)  # a stale socket of a dead engine is replaced at once
        self.socket_inode = os.stat(self.place.socket).st_ino  # ours, until another engine replaces it
        self.listener = listener

    def write_info(self) -> None:
        from ratui.version import __version__

        info = {"pid": os.getpid(), "project": str(self.place.project), "since": self.since, "version": __version__,
                "python": sys.executable, "fingerprint": self.fingerprint, "spark": self.spark_where(),
                "commands": self.served_count, "idle_minutes": self.idle_minutes, **self._hosting()}
        temporary = self.place.info.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(info))
        os.replace(temporary, self.place.info)

    def spark_where(self) -> str | None:
        from ratui.engine.spark import session as spark_session

        return spark_session.describe() if spark_session.is_started() else None

    def serve(self) -> None:
        listener = self.listener  # retire() closes it (and forgets it) from another thread: accept() then fails
        assert listener is not None
        while not self.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                self.tick()
                continue
            except OSError:
                if self.stopping.is_set() or self.retired:
                    break
                raise
            threading.Thread(target=self.connection, args=(conn,), name="ratui-engine-command", daemon=True).start()
        self.wait_for_commands()

    def tick(self) -> None:
        with self.lock:
            busy = bool(self.in_flight)
            in_flight = len(self.in_flight)
            idle = time.monotonic() - self.last_active
        self.heap.idle(in_flight, idle)
        if not (self.place.project / "ratui.yaml").is_file():
            self.retire(f"the project {self.place.project} is gone")
            self.stopping.set()
        elif not busy and idle > self.idle_minutes * 60:
            self.retire(f"no command for {self.idle_minutes} minute(s)")
            self.stopping.set()
        elif not busy and self.place.read_info() is None and not self.retired:
            try:
                self.write_info()  # removed by hand: said again
            except OSError as exc:  # a full disk: the engine serves on, its socket still there
                log(f"the engine's info cannot be written: {exc.strerror}")
        self.rotate_log()

    def rotate_log(self) -> None:
        """The log moved aside once it is over logfile.MAX_BYTES, when it is this engine's stdout and stderr."""
        if logfile.writes_to(self.place.log, 2):
            for stream in (sys.__stdout__, sys.__stderr__):
                try:
                    stream.flush()
                except (OSError, ValueError, AttributeError):
                    pass
            if logfile.rotate(self.place.log, (1, 2)):
                log(f"the log was over {logfile.MAX_BYTES // 2**20} MiB: the older lines are in "
                    f"{logfile.older(self.place.log).name}")

    def renew_if_due(self) -> None:
        """After a command has had its answer: retire when the engine has served engine.max_commands or its process
        tree (the engine and Spark's JVM) uses more than engine.max_memory_mb; the next command starts a fresh
        engine, and says why (the note left here)."""
        if self.retired:
            return
        rss = tree_rss()
        if self.served_count >= self.max_commands:
            why = f"it served {self.served_count} commands (engine.max_commands {self.max_commands})"
        elif rss is not None and rss > self.max_memory_mb * 2**20:
            why = f"it used {rss / 2**20:,.0f} MiB (engine.max_memory_mb {self.max_memory_mb:,})"
        else:
            return
        self.place.leave_note({"pid": os.getpid(), "why": why})
        self.retire(f"renewing itself: {why}")

    def retire(self, why: str) -> None:
        """Take no new command: the socket, the info and the lock go (a new engine may start at once); the
        commands in flight finish here."""
        with self.lock:
            if self.retired:
                return
            self.retired = why
        log(f"retiring: {why}")
        listener, self.listener = self.listener, None
        if listener is not None:
            try:
                if _inode(self.place.socket) == self.socket_inode:
                    self.place.socket.unlink(missing_ok=True)
            finally:
                listener.close()
        info = self.place.read_info()
        if info and info.get("pid") == os.getpid():
            self.place.info.unlink(missing_ok=True)
        if self.alive_lock is not None:
            os.close(self.alive_lock)
            self.alive_lock = None

    def wait_for_commands(self) -> None:
        while True:
            with self.lock:
                if not self.in_flight:
                    return
            time.sleep(0.1)

    def stop_all(self, signum: int) -> None:
        """SIGTERM or SIGINT of the engine: every command's runs are cancelled, then the engine ends."""
        self.retire(f"{signal.Signals(signum).name}")
        with self.lock:
            served = list(self.in_flight.values())
        for one in served:
            one.signal(signum)
        self.stopping.set()

    # ------------------------------------------------------------------------------------------ a connection
    def connection(self, conn: socket.socket) -> None:
        try:
            pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                 struct.calcsize("3i")))
            if uid != os.getuid():
                log(f"refused a command from uid {uid} (pid {pid})")
                send(conn, {"refused": f"this warm engine belongs to uid {os.getuid()}; you are uid {uid}"})
                return
            reader = Reader(conn)
            message, fds = reader.next(max_fds=3)
            if message is None:
                return
            if message.get("status"):
                send(conn, {"status": self.status()})
            elif message.get("stop"):
                send(conn, {"stopping": self.status()})
                self.stop_all(signal.SIGTERM)
            elif "command" in message:
                why = self.why_not(message, fds)
                if why is not None:
                    for fd in fds:
                        os.close(fd)
                    send(conn, why)
                    return
                Served(self, conn, reader, message, fds).serve()
            elif "api" in message:  # the Python API's query (api_served.py)
                from ratui.warm import api_served

                why = api_served.why_not(self, message, fds)
                if why is not None:
                    for fd in fds:
                        os.close(fd)
                    send(conn, why)
                    return
                api_served.serve(self, conn, reader, message, fds[0])
        except (OSError, WireError) as exc:
            log(f"a connection failed: {exc}")
        except Exception:  # a bug of the engine: its client is told, and the engine goes on
            import traceback

            log(f"a command failed in the engine:\n{traceback.format_exc()}")
            try:
                send(conn, {"refused": "the engine failed to take the command (its log has the traceback)"})
            except OSError:
                pass
        finally:
            try:  # wakes the command's signal listener, blocked reading this socket, and tells the client
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def why_not(self, message: dict, fds: list[int]) -> dict | None:
        """None when this engine runs the command, else the answer to give."""
        if len(fds) != 3:
            return {"refused": "a command comes with its stdin, stdout and stderr"}
        if message.get("project") != str(self.place.project):
            return {"refused": f"this engine serves {self.place.project}, not {message.get('project')}"}
        if self.retired:
            return {"restart": f"the engine is stopping ({self.retired})"}
        if message.get("fingerprint") != self.fingerprint:
            env = message.get("env") or {}
            names = places.differences(self.env, env)
            why = (f"the environment changed ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})" if names
                   else "ratui or its Python environment changed")
            self.retire(why)
            return {"restart": why}
        return None

    def status(self) -> dict:
        from ratui.version import __version__

        with self.lock:
            commands = [{"argv": s.argv, "pid": s.client_pid, "since": s.began} for s in self.in_flight.values()]
        return {"pid": os.getpid(), "project": str(self.place.project), "since": self.since,
                "version": __version__, "spark": self.spark_where(), "commands_served": self.served_count,
                "running": commands, "idle_minutes": self.idle_minutes, "rss_bytes": tree_rss(),
                "rss_engine_bytes": _rss(), "max_memory_mb": self.max_memory_mb,
                "max_commands": self.max_commands, "engines_open": len(self.engines), **self._hosting()}

    def _hosting(self) -> dict:
        """`console`: a console serves (what a console's status line reads); `hosted_by`: which process does."""
        return {"console": self.hosted_by == "console", "hosted_by": self.hosted_by}

    # ------------------------------------------------------------------------------------------ the project
    def open_engine(self, root: Path):
        """The project's Engine kept open between commands: a new one when ratui.yaml changed (its Spark settings
        changed: the engine retires, RAT-ENG-004 asks the command to start a fresh one)."""
        import hashlib

        from ratui.engine.facade.engine import Engine
        from ratui.engine.project.settings import load_settings
        from ratui.engine.spark import jit

        jit.lives_long()  # a command before the warm-up: its Spark is the engine's, for many commands
        if root != self.place.project:
            raise _refused(f"this warm engine serves {self.place.project}, not {root}")
        digest = hashlib.sha256((root / "ratui.yaml").read_bytes()).hexdigest()
        with self.lock:
            engine = self.engines.get(digest)
        if engine is not None:
            return engine
        settings = load_settings(root)
        key = spark_key(settings)
        if self.spark_key is not None and key != self.spark_key:
            from ratui.engine.spark import session as spark_session

            if spark_session.is_started():
                self.retire("ratui.yaml's Spark settings changed")
                raise Restart("ratui.yaml's Spark settings changed")
        self.spark_key = key
        self.adopt(settings)
        engine = Engine.open(root, settings)
        with self.lock:
            self.stale.extend(self.engines.values())  # closed once no command in flight holds one
            self.engines = {digest: engine}
        return engine

    def adopt(self, settings: Any) -> None:
        """ratui.yaml's engine section: how long this engine waits, and when it renews itself."""
        self.idle_minutes = settings.engine_idle_minutes
        self.max_memory_mb = settings.engine_max_memory_mb
        self.max_commands = settings.engine_max_commands

    def engine_for_command(self, root: Path):
        """cli/common.engine() in the warm engine: the kept Engine, held by the command until it ends."""
        engine = self.open_engine(root)
        streams = stdio.current()
        if streams is not None and streams.owner is not None:
            streams.owner.engines.append(engine)
        return engine

    def finished(self, number: int) -> None:
        """A command ended: the Engines of an older ratui.yaml that no command in flight holds are closed."""
        with self.lock:
            self.in_flight.pop(number, None)
            self.last_active = time.monotonic()
            held = {id(e) for s in self.in_flight.values() for e in s.engines}
            closing = [e for e in self.stale if id(e) not in held]
            self.stale = [e for e in self.stale if id(e) in held]
            in_flight = len(self.in_flight)
        self.heap.command_ended(in_flight)
        for engine in closing:
            try:
                engine.close()
            except Exception as exc:
                log(f"closing an engine of an older ratui.yaml failed: {exc}")
        del closing

    def warm_up(self, after_pid: int) -> None:
        """Spark starts once the command that started the engine has ended (`after_pid`; 0: at once), and does a
        little work so that the next command finds its code compiled."""
        while after_pid and _pid_alive(after_pid) and not self.stopping.is_set():
            time.sleep(0.1)  # its imports too: the command's own process has the machine to itself
        from ratui.engine.project.settings import load_settings
        from ratui.engine.spark import jit, session as spark_session

        jit.lives_long()
        try:
            settings = load_settings(self.place.project)
        except Exception as exc:  # the project's errors are the first command's to report
            log(f"Spark not started ahead: {exc}")
            return
        self.spark_key = spark_key(settings)
        self.adopt(settings)
        try:
            spark_session.get_spark(settings)
            log(f"Spark ready in {spark_session.startup_seconds() or 0:.1f} s: {self.spark_where()}")
            self.write_info()
            if self.open_engine(self.place.project).start_data_server_early():  # a confined pipeline's server
                log("the data server is starting (the project has a Python pipeline that runs in a child)")
        except BaseException as exc:  # the first command that needs Spark reports it
            log(f"Spark did not start ahead: {exc}")


def _refused(text: str) -> Exception:
    from ratui.engine.errors import RatuiError

    return RatuiError("RAT-ENG-002", text)


def spark_key(settings: Any) -> tuple:
    return (settings.spark_master, settings.spark_remote, tuple(sorted(settings.spark_config.items())),
            settings.spark_jit, settings.spark_connect_retry_seconds)


def _collect_garbage() -> bool:
    from ratui.engine.spark import session as spark_session

    return spark_session.collect_garbage()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _rss() -> int | None:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except Exception:
        return None


def tree_rss() -> int | None:
    """The resident memory of this process and every process it started (Spark's JVM, a data server)."""
    try:
        import psutil

        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass  # ended meanwhile
        return total
    except Exception:
        return None
