"""The data server: a Spark Connect server of ratui's own, the only handle an isolated Python pipeline has on data.

One per project and ratui process, started on the first isolated run and stopped with the process (its whole
process group: Python workers too). It listens on 127.0.0.1 with a fresh token, and refuses on behalf of the
pipeline what the pipeline's own process cannot do:

- `reflect`, `java_method`, `try_reflect` and `TRANSFORM ... USING` (Spark's restricted mode, a static setting no
  session can turn off), SQL on file paths off by default;
- when the level is confined or jail, the JVM itself runs under Landlock (jvm_launch.py applies it before the
  JVM starts, so every thread and every Python worker it starts inherits it): it reads the Java and Python
  installations, the project's table warehouse and its run folders, writes only its scratch folder and the run
  folders (where isolated runs' inputs and results are), executes only Java and Python, binds and connects
  only its own ports. A file path, `/proc`, the state database, ratui.yaml, the home folder: refused by the
  kernel whatever the client asks;
- its environment is an allow-list (no AWS keys, no tokens but its own).

The pipeline's result comes back as Parquet files in its run folder, which ratui's own Spark reads and writes
into the table: the data server never writes a table.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ratui.engine.errors import RatuiError

log = logging.getLogger("ratui.isolation")

START_SECONDS = 90.0
SERVER_MEMORY = "1g"

# read by the JVM when the level confines it: what Java, the Python workers and name resolution need
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/etc/java-17-openjdk", "/etc/java-21-openjdk", "/etc/java-25-openjdk",
               "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf", "/etc/resolv.conf", "/etc/gai.conf",
               "/etc/localtime", "/etc/timezone", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
               "/dev/urandom", "/dev/random", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg",
               "/proc/sys/vm/overcommit_memory", "/proc/sys/kernel/pid_max", "/sys/fs/cgroup",
               "/sys/devices/system/cpu")



def runs_root(state_dir: Path) -> Path:
    """Where isolated runs keep their inputs, results and scratch folders (runner.py): one folder per run."""
    return state_dir / "isolation" / "runs"


@dataclass
class DataServer:
    root: Path  # the project
    state_dir: Path
    reads: tuple[Path, ...]  # the folders of the project's tables (each namespace's warehouse folder)
    confined: bool
    port: int = 0
    token: str = field(default="", repr=False)
    process: subprocess.Popen | None = None
    sockets: Path | None = None  # the Python workers' socket folder (0700, removed with the server)

    @property
    def url(self) -> str:
        # PySpark sends a token without TLS only to the name localhost
        return f"sc://localhost:{self.port}/;token={self.token}"

    @property
    def folder(self) -> Path:
        return self.state_dir / "isolation" / "server"

    @property
    def log_file(self) -> Path:
        return self.folder / "data-server.log"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, spark_config: dict[str, str], java_option: str = "") -> None:
        folder = self.folder
        shutil.rmtree(folder, ignore_errors=True)
        for sub in ("tmp", "local", "conf", "warehouse"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        runs_root(self.state_dir).mkdir(parents=True, exist_ok=True)
        for read in self.reads:  # a Landlock rule needs its folder now: an early start may come before any table
            read.mkdir(parents=True, exist_ok=True)
        from ratui.engine.spark.launch_conf import LOG4J2  # the same quiet log as ratui's own JVM, in its own file

        (folder / "log4j2.properties").write_text(LOG4J2.format(log_file=self.log_file))
        self.token = secrets.token_urlsafe(32)
        self.sockets = Path(tempfile.mkdtemp(prefix="ratui-py-", dir="/tmp" if os.path.isdir("/tmp") else None))
        ports = free_ports(3)
        self.port = ports[0]
        argv, env = self._command(ports, spark_config, java_option)
        plan = {
            "argv": argv, "env": env, "parent": os.getpid(), "confine": self.confined,
            "read": [str(p) for p in self._reads()], "write": [str(folder), str(runs_root(self.state_dir)),
                                                              "/dev/null"],
            "execute": [str(p) for p in self._executables(argv[0])],
            "sockets": [str(self.sockets)], "ports": ports,
        }
        started = threading.Event()
        failure: list[BaseException] = []

        def keeper() -> None:
            # the JVM dies with the thread that started it (PR_SET_PDEATHSIG is per thread): this one lives as long
            # as the server, and ends with ratui's process at the latest
            try:
                with open(folder / "jvm.out", "ab") as out:
                    self.process = subprocess.Popen(
                        [sys.executable, "-I", "-m", "ratui.engine.isolation.jvm_launch"], stdin=subprocess.PIPE,
                        stdout=out, stderr=out, cwd=str(folder), env=env, start_new_session=True)
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps(plan).encode())
                self.process.stdin.close()
            except BaseException as exc:  # noqa: BLE001 - said by the thread that waits for it
                failure.append(exc)
                return
            finally:
                started.set()
            self.process.wait()

        threading.Thread(target=keeper, name="ratui-data-server", daemon=True).start()
        started.wait()
        if failure:
            raise RatuiError("RAT-ISO-005", f"the data server could not be started: {failure[0]}")
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RatuiError("RAT-ISO-005", f"the data server exited with {self.exit_text()} before it "
                                 f"answered: {self.tail()}", file=str(self.log_file))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RatuiError("RAT-ISO-005", f"the data server did not answer within {START_SECONDS:.0f} s",
                         file=str(self.log_file))

    def exit_text(self) -> str:
        code = self.process.poll() if self.process else None
        if code is None:
            return "no exit"
        return f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"

    def tail(self) -> str:
        lines: list[str] = []
        for name in ("jvm.out", "data-server.log"):
            try:
                lines += (self.folder / name).read_text(errors="replace").splitlines()
            except OSError:
                pass
        useful = [line for line in lines if "WARN" not in line and line.strip()]
        return " | ".join(useful[-3:])[:600] or "(nothing in its log)"

    def stop(self) -> None:
        process, self.process = self.process, None
        try:
            self._end(process)
        finally:
            if self.sockets is not None:
                shutil.rmtree(self.sockets, ignore_errors=True)

    def _end(self, process: subprocess.Popen | None) -> None:
        if process is None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(process.pid, sig)  # the JVM and every Python worker it started
            except (ProcessLookupError, PermissionError):
                break
            try:
                process.wait(timeout=wait)
                if sig == signal.SIGTERM:
                    try:
                        os.killpg(process.pid, signal.SIGKILL)  # workers left behind by the JVM
                    except (ProcessLookupError, PermissionError):
                        pass
                break
            except subprocess.TimeoutExpired:
                continue

    # ------------------------------------------------------------------------------------------ its command

    def _command(self, ports: list[int], spark_config: dict[str, str],
                 java_option: str = "") -> tuple[list[str], dict[str, str]]:
        from ratui.engine.spark.launch_conf import REQUIRED_CONF

        spark_home = Path(_pyspark_home())
        folder = self.folder
        conf = {k: v for k, v in spark_config.items() if k.startswith("spark.sql.")}
        conf.update({k: v for k, v in REQUIRED_CONF.items() if k != "spark.scheduler.mode"})
        conf.update({
            "spark.app.name": f"ratui-data:{self.root.name}",
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(ports[0]),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.port": str(ports[1]),
            "spark.blockManager.port": str(ports[2]),
            "spark.driver.memory": SERVER_MEMORY,
            "spark.local.dir": str(folder / "local"),
            "spark.sql.warehouse.dir": str(folder / "warehouse"),
            # the data side's rules (docs/concepts/isolation.md)
            "spark.sql.restrictedMode.enabled": "true",
            "spark.sql.runSQLOnFiles": "false",
            # Python workers (a pipeline's UDFs) talk to the JVM over Unix sockets in a folder of its own (a short
            # path: a socket's path is at most 107 bytes, and Spark wants the folder's under 61), and
            # run this Python, under the JVM's Landlock domain
            "spark.python.unix.domain.socket.enabled": "true",
            "spark.python.unix.domain.socket.dir": str(self.sockets),
            # each worker started by the JVM itself: the daemon's forks are known to the JVM by pid only, and
            # finding them under /proc is beyond its Landlock domain (its own /proc entry only)
            "spark.python.use.daemon": "false",
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.driver.extraJavaOptions": (
                f"-Dlog4j2.configurationFile=file:{folder / 'log4j2.properties'} -XX:-UsePerfData "
                f"-Djava.io.tmpdir={folder / 'tmp'} -XX:ErrorFile={folder / 'hs_err_pid%p.log'} "
                f"-Dderby.system.home={folder / 'tmp'} {java_option}").rstrip(),
        })
        args = ["--master", "local[2]", "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        args.append("spark-internal")
        java = _java()
        env = {
            "PATH": "/usr/bin:/bin", "HOME": str(folder / "tmp"), "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TZ": "UTC", "SPARK_HOME": str(spark_home), "SPARK_CONF_DIR": str(folder / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1", "HADOOP_USER_NAME": "ratui", "PYTHONHASHSEED": "0",
            "SPARK_CONNECT_AUTHENTICATE_TOKEN": self.token,  # the server reads it here, not on its command line
            # the Python of a Connect client's UDFs (the server reads these, not spark.pyspark.python)
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "JAVA_HOME": str(Path(java).parent.parent),
            "SPARK_SCALA_VERSION": _scala_version(spark_home),  # what load-spark-env.sh tells the launcher
        }
        # Spark's launcher turns spark-submit's arguments into the JVM's command (module options and all); run
        # here, unconfined, so that the confined process only ever executes Java itself
        launcher = subprocess.run(
            [java, "-Xmx128m", "-cp", str(spark_home / "jars" / "*"), "org.apache.spark.launcher.Main",
             "org.apache.spark.deploy.SparkSubmit", *args],
            capture_output=True, env=env, cwd=str(folder), timeout=120)
        parts = launcher.stdout.split(b"\0")
        if launcher.returncode != 0 or b"" not in parts:
            raise RatuiError("RAT-ISO-005", "Spark's launcher could not build the data server's command: "
                             f"{launcher.stderr.decode(errors='replace').strip()[:300]}")
        command = [p.decode() for p in parts[parts.index(b"") + 1:] if p]
        command[0] = java
        return command, env

    def _reads(self) -> list[Path]:
        paths = [Path(p) for p in SYSTEM_READ]
        paths += [Path(sys.prefix), Path(sys.base_prefix), Path(_pyspark_home()), Path(_java()).parent.parent,
                  *self.reads]
        return paths

    def _executables(self, java: str) -> list[Path]:
        java_home = Path(java).parent.parent
        # chmod: Hadoop's local file system sets the permissions of what it writes with the chmod program when
        # its native library is absent (Java itself may chmod any path it can name anyway), and Spark removes its
        # scratch folders with rm before it falls back to Java's own deletes; both run inside this domain (they may
        # touch only what the JVM may)
        tools = [Path(os.path.realpath(p)) for p in ("/usr/bin/chmod", "/bin/chmod", "/usr/bin/rm", "/bin/rm")
                 if os.path.exists(p)]
        return [Path(java), java_home / "lib" / "jspawnhelper", Path(os.path.realpath(sys.executable)),
                *tools, *dynamic_loaders()]


def dynamic_loaders() -> list[Path]:
    """The ELF interpreter(s) of this machine: the kernel opens it for execution with every program it starts, so
    Landlock must let it execute too."""
    import glob

    found = set()
    for pattern in ("/lib64/ld-linux*.so*", "/lib/ld-linux*.so*", "/lib/*/ld-linux*.so*", "/usr/lib/*/ld-linux*.so*",
                    "/lib/ld-musl-*.so*"):
        for path in glob.glob(pattern):
            found.add(Path(os.path.realpath(path)))
    return sorted(found)


def _scala_version(spark_home: Path) -> str:
    for jar in (spark_home / "jars").glob("spark-core_*.jar"):
        return jar.name.split("_", 1)[1].split("-", 1)[0]
    return "2.13"


def _pyspark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.realpath(pyspark.__file__))


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not candidate or not os.path.exists(candidate):
        raise RatuiError("RAT-ISO-005", "no Java found for the data server (JAVA_HOME or java on PATH)")
    return os.path.realpath(candidate)


def free_ports(count: int) -> list[int]:
    sockets, ports = [], []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in sockets:
            sock.close()
    return ports


_servers: list[DataServer] = []  # at most one: a process serves one project at a time (a test process, many)
_lock = threading.Lock()


@dataclass
class EarlyStart:
    """A start begun ahead of the run that needs it (start_early): the thread doing it, and how it ended."""

    root: Path
    reads: tuple[Path, ...]
    confined: bool
    began_at: float  # time.time() when the start began
    thread: threading.Thread | None = None
    error: BaseException | None = None
    ready_at: float | None = None

    def serves(self, root: Path, reads: tuple[Path, ...], confined: bool) -> bool:
        return self.root == root and self.confined == confined and set(reads) <= set(self.reads)


_early: list[EarlyStart] = []  # the latest early start of this process (none, or one)
_early_lock = threading.Lock()
_closing = threading.Event()  # the process is ending: a start that completes now stops its server at once


def start_early(root: Path, state_dir: Path, reads: tuple[Path, ...], spark_config: dict[str, str], *,
                confined: bool, java_option: str = "") -> EarlyStart:
    """Begin the data server's start in the background and return at once (a server already up for this project
    and level, or a start already under way: nothing new). Whatever goes wrong is kept for the run that needs the
    server (data_server() raises it there, as if that run had started it), never raised here."""
    reads = tuple(sorted(reads))
    with _early_lock:
        pending = _early[0] if _early else None
        if pending is not None and pending.serves(root, reads, confined) and pending.error is None:
            return pending
        early = EarlyStart(root, reads, confined, time.time())

        def starting() -> None:
            try:
                server = _obtain(root, state_dir, reads, spark_config, confined=confined, java_option=java_option)
                early.ready_at = time.time()
                _first_query(server)
            except BaseException as exc:  # noqa: BLE001 - for the run that needs the server
                early.error = exc
                log.info("the data server's early start failed: %s", exc)

        early.thread = threading.Thread(target=starting, name="ratui-data-server-early", daemon=True)
        _early[:] = [early]
        early.thread.start()
        return early


def _first_query(server: DataServer) -> None:
    """A small query of the fresh server's own, while nothing waits for it: a new JVM's first plans load and compile
    the classes every later query uses, and the first pipeline would pay that. A failure here is only logged: the
    server is up, and the run that uses it reports what goes wrong."""
    began = time.monotonic()
    try:
        from pyspark.sql.connect.session import SparkSession

        session = SparkSession.builder.remote(server.url).create()
        try:
            session.range(0, 1000, 1, 2).selectExpr("id % 7 AS k").groupBy("k").count().collect()
        finally:
            session.stop()
        log.info("the data server's first query took %.2f s", time.monotonic() - began)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.info("the data server's first query failed: %s", exc)


def early_start() -> EarlyStart | None:
    """This process's latest early start (tests, logs)."""
    with _early_lock:
        return _early[0] if _early else None


def data_server(root: Path, state_dir: Path, reads: tuple[Path, ...], spark_config: dict[str, str], *,
                confined: bool, java_option: str = "") -> DataServer:
    """This process's data server for the project (confined or not), started on first use; started again when it
    ended, serves another project or level, or must read folders it was not started with (a new namespace).
    `java_option`: the JIT option of ratui's own JVM (spark/jit.py), which a server started now takes too.
    A start begun early (start_early) for this project and level is waited for (its own start is bounded); when
    it failed, its error is this run's, as if this run had started it, and the next run starts afresh."""
    with _early_lock:
        early = _early[0] if _early else None
    if early is not None and early.serves(root, tuple(sorted(reads)), confined):
        assert early.thread is not None
        early.thread.join()  # bounded: the launcher's timeout, then START_SECONDS
        if early.error is not None:
            with _early_lock:
                if _early and _early[0] is early:
                    _early.clear()
            if isinstance(early.error, RatuiError):
                raise early.error
            raise RatuiError("RAT-ISO-005", f"the data server could not be started: {early.error}")
    return _obtain(root, state_dir, reads, spark_config, confined=confined, java_option=java_option)


def _obtain(root: Path, state_dir: Path, reads: tuple[Path, ...], spark_config: dict[str, str], *,
            confined: bool, java_option: str = "") -> DataServer:
    with _lock:
        server = _servers[0] if _servers else None
        if server is not None and server.alive() and server.root == root and server.confined == confined \
                and set(reads) <= set(server.reads):
            return server
        if server is not None:
            if not server.alive():
                log.warning("the data server ended (%s): starting another", server.exit_text())
            server.stop()
            _servers.clear()
        server = DataServer(root, state_dir, tuple(sorted(reads)), confined)
        try:
            server.start(spark_config, java_option)
        except BaseException:
            server.stop()
            raise
        if _closing.is_set():  # the process ended while it started: no JVM outlives ratui
            server.stop()
            raise RatuiError("RAT-ISO-005", "the data server was started while ratui was ending")
        _servers.append(server)
        return server


def current() -> DataServer | None:
    """This process's data server, if one is up (tests, status)."""
    with _lock:
        return _servers[0] if _servers and _servers[0].alive() else None


def stop_servers() -> None:
    """Stop this process's data server and forget its early start (a test's clean slate; the process goes on)."""
    with _early_lock:
        pending, _early[:] = list(_early), []
    for early in pending:  # a start under way ends first: then its server is one of _servers
        if early.thread is not None:
            early.thread.join()
    with _lock:
        for server in _servers:
            server.stop()
        _servers.clear()


def stop_all() -> None:
    """The process ends: its data server stops, and a start still under way stops its server as it completes."""
    _closing.set()
    with _early_lock:
        _early.clear()
    with _lock:
        for server in _servers:
            server.stop()
        _servers.clear()


atexit.register(stop_all)
