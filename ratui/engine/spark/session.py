"""The SparkSession: one per process, started once, kept warm, and silent. The one place that knows how Spark is
reached:

    local[N]            (the default, local[*]) Spark in ratui's own JVM
    spark://HOST:PORT   a standalone cluster: ratui's JVM is the driver, the work runs on the cluster's executors
    sc://HOST:PORT      (spark.remote, or SPARK_REMOTE) a Spark Connect client: no JVM and no py4j gateway in
                        ratui's process; the server runs the driver and owns the executors (connect.py starts it)

Nothing the JVM prints may reach the terminal (Textual draws on it): the JVM is launched with its stdout
and stderr redirected to a file, log4j2 writes to a file under `.ratui/logs/`, the console progress bar is
off, and PySpark's own Python loggers get a NullHandler. See SPARK_ICEBERG_NOTES.md for why each is needed.
A Connect client has no JVM; gRPC's own logging is off unless GRPC_VERBOSITY says otherwise.

Everything the process knows of its Spark is one object, RUNTIME (a SparkRuntime): the session and its lock, the
start on the side, a setting Spark refused, where a Connect server is, the sessions handed out and each run's
(jobs.py tags, cancels and follows a run's work on them). The module's functions are its bound methods.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import Settings
from ratui.engine.spark import addresses, class_archive, connect, jit, s3a
from ratui.engine.spark import errors as spark_errors
from ratui.engine.spark.launch_conf import REQUIRED_CONF, classic_launch

log = logging.getLogger("ratui.spark")

def _quiet_python_loggers() -> None:
    # PySpark logs query context on errors through PySparkLogger (which takes extra keyword arguments):
    # create those loggers with its class, or PySpark's own calls fail on a plain Logger.
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logger = PySparkLogger.getLogger(name)
        logger.handlers[:] = [logging.NullHandler()]
        logger.propagate = False
    for name in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
        py4j_logger = logging.getLogger(name)
        py4j_logger.handlers[:] = [logging.NullHandler()]
        py4j_logger.propagate = False


# the launch of a JVM is a chain: spark-submit (a shell script) execs spark-class, whose launcher JVM prints the
# command the script then execs as the driver JVM
LAUNCH_PARTS = ("spark-submit", "spark-class", "org.apache.spark.deploy.SparkSubmit",
                "org.apache.spark.launcher.Main")


def _kill_launch_chain() -> None:
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                if any(part.endswith(LAUNCH_PARTS) for part in child.cmdline()):
                    child.kill()
            except psutil.Error:  # ended meanwhile
                pass
    except Exception:
        log.debug("could not stop the JVM", exc_info=True)


class SparkRuntime:
    """This process's Spark and everything ratui keeps beside it, in one place: one instance, RUNTIME, whose
    methods are the module's functions. A test sets its attributes aside (a process whose Spark has not started)
    without reaching into module globals."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # starting and stopping
        self.session: Any = None
        self.startup_seconds: float | None = None
        self.listeners: list[Callable[[str], None]] = []
        self.refused: tuple[str, str, str | None, int | None, str | None] | None = None  # a setting Spark refused
        self.soon: threading.Thread | None = None  # a start on the side (start_soon), once asked for
        self.soon_failed: BaseException | None = None  # how it failed, for the next get_spark() of another thread
        self.wanted = False  # whether anything but the start on the side has asked for the session
        self.did_work = False  # whether a pipeline or a query ran on this process's JVM (jobs.bind_thread)
        self.archive_hooks = False  # the exit hooks of the JVM that writes the class archive, registered once
        # Spark Connect: the server's URL (None when the process runs a JVM of its own), the SQL settings every
        # session gets, what the server says about itself, the sessions of each run, every session handed out
        # (released at exit), the latest progress report of each run's (or query's) operation and the operations
        # it finished, and the bounds of the client's retries
        self.remote_url: str | None = None
        self.remote_ignored: str | None = None  # SPARK_REMOTE set in the environment but ratui.yaml named the master
        self.session_conf: dict[str, str] = {}
        self.server: dict[str, str] = {}
        self.run_sessions: dict[str, list[Any]] = {}
        self.all_remote: weakref.WeakSet[Any] = weakref.WeakSet()
        self.remote_progress: dict[str, dict[str, Any]] = {}
        self.remote_jobs_done: dict[str, int] = {}
        self.sessions_lock = threading.Lock()  # the Connect sessions and progress reports above
        self.retries = connect.RetryBounds()

    def is_started(self) -> bool:
        return self.session is not None

    def is_remote(self) -> bool:
        """True when the process's Spark is a Spark Connect server (no JVM, no SparkContext here)."""
        return self.remote_url is not None

    def on_state(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Be told "starting" / "ready" / "failed" (the console's footer shows it). Returns an unsubscribe."""
        self.listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self.listeners:
                self.listeners.remove(listener)

        return unsubscribe

    def _notify(self, state: str) -> None:
        for listener in list(self.listeners):
            try:
                listener(state)
            except Exception:  # a listener's failure must not break Spark start-up
                log.exception("spark state listener failed")

    def get_spark(self, settings: Settings):
        """The process's SparkSession, started on first use with the project's settings. A setting Spark refused is
        refused again without starting another JVM (settings are read once per process)."""
        if threading.current_thread() is not self.soon:
            self.wanted = True
        if self.session is not None:
            return self.session
        with self.lock:
            if self.session is not None:
                return self.session
            if self.refused is not None:
                refused = self.refused
                raise RatuiError(*refused[:2], file=refused[2], line=refused[3], hint=refused[4])
            if self.soon_failed is not None and threading.current_thread() is not self.soon:
                # the start on the side has just failed (an unreachable master, say): its caller gets that failure
                # instead of waiting for a second attempt; a later call tries again
                failed, self.soon_failed = self.soon_failed, None
                raise failed
            self._notify("starting")
            began = time.monotonic()
            try:
                self.session = self._start(settings)
            except BaseException as exc:
                if isinstance(exc, RatuiError) and exc.code in ("RAT-CFG-007", spark_errors.JVM_NOT_STARTED):
                    self.refused = (exc.code, exc.message, exc.file, exc.line, exc.hint)
                if threading.current_thread() is self.soon:
                    self.soon_failed = exc
                self._notify("failed")
                raise
            self.startup_seconds = time.monotonic() - began
            self._notify("ready")
            return self.session

    def start_soon(self, settings: Settings) -> None:
        """Start Spark now on a thread of its own: the JVM boots while the caller goes on (imports, opens the
        catalog, creates the run's branch), and get_spark() waits for it. A start that fails there fails the next
        get_spark() of another thread the same way (once: later calls try again). Call it only when a run is about
        to need Spark: a JVM nobody uses still boots (it ends when the process does)."""
        with self.lock:
            if self.session is not None or self.soon is not None or settings.spark_remote:
                return  # started; a Connect client has no JVM to boot

            def start() -> None:
                try:
                    self.get_spark(settings)
                except BaseException:  # kept for the run's own get_spark(), which reports it
                    log.debug("Spark start on the side failed", exc_info=True)

            self.soon = threading.Thread(target=start, name="ratui-spark-start", daemon=True)
            self.soon.start()
            atexit.register(self._kill_unwanted_jvm)

    def _kill_unwanted_jvm(self) -> None:
        """At exit: a JVM started on the side that no run asked for (the run failed or was interrupted before it
        needed Spark) is killed, every link of its launch. Left alone it would end by itself, but as a JVM that did
        no work it would first write the machine's class archive, when it is the one to write it, and every later
        start would map that poor archive."""
        if not self.wanted:
            _kill_launch_chain()

    def _ran_jobs(self) -> bool:
        """Whether the JVM ran a Spark job outside ratui's runs and queries (those have a job group: did_work)."""
        session = self.session
        if session is None:
            return False
        try:
            return bool(session.sparkContext.statusTracker().getJobIdsForGroup(None))
        except Exception:  # cannot tell: let it write
            return True

    def _no_archive_of_an_idle_jvm(self) -> None:
        """At exit: a JVM that is to write the machine's class archive but ran no pipeline and no query (a console
        opened and closed, a run that failed before its Spark work) is killed before it can, and its claim goes: an
        archive of a JVM's start alone holds about half the classes a run needs (111 MB against 194 MB), and every
        later JVM of this installation would map it (measured: a cold `ratui run` 1.4 s slower, 6.67 s vs 5.30 s).
        The next JVM that works writes the archive instead."""
        if self.did_work or class_archive.writing is None or self._ran_jobs():
            return
        _kill_launch_chain()
        for path in class_archive.writing:
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass

    def _start(self, settings: Settings):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        _quiet_python_loggers()
        if not settings.spark_remote:
            return self._start_classic(settings)
        session, applied, server = connect.start(settings, REQUIRED_CONF, self.retries)
        with self.sessions_lock:
            self.all_remote.add(session)
        self.session_conf, self.server, self.remote_url = applied, server, settings.spark_remote
        return session

    def _start_classic(self, settings: Settings):
        """Spark in a JVM of ratui's own: local, or the driver of a standalone (or any other) cluster."""
        if os.environ.pop("SPARK_REMOTE", None):
            # ratui.yaml names the master: a Connect URL exported in the user's shell must not reach PySpark's launcher
            # (spark-submit refuses a remote beside a master) nor its session builder (which would go remote)
            self.remote_ignored = settings.spark_remote_ignored or "SPARK_REMOTE"
        master = settings.spark_master
        cluster = addresses.master_addresses(master) if master.startswith("spark://") else []
        for host, port in cluster:
            addresses.check_reachable(host, port, f"Spark master {master}", "spark.master")
        from pyspark import SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession

        conf, java_opts, extra, connector = classic_launch(settings, cluster)

        def launch(archive: str):
            opts = f"{java_opts} {archive}".strip()
            conf.set("spark.driver.extraJavaOptions", f"{opts} {extra}" if extra else opts)
            # the JVM inherits the file as its stdout and stderr; our copy can close once it is started
            with open(settings.log_dir / "jvm.out", "ab") as jvm_out:
                return launch_gateway(conf, popen_kwargs={"stdout": jvm_out, "stderr": jvm_out,
                                                          "stdin": subprocess.DEVNULL, "cwd": str(settings.state_dir)})

        archive = class_archive.option(settings.spark_config.get("spark.driver.extraClassPath", ""))
        if class_archive.writing is not None and not self.archive_hooks:
            self.archive_hooks = True
            atexit.register(class_archive.write_in_view, self.stop)  # runs after the one below (last in, first out)
            atexit.register(self._no_archive_of_an_idle_jvm)
        jvm_out = settings.log_dir / "jvm.out"
        with open(jvm_out, "ab") as out:  # how this JVM was started, before what it says itself
            out.write(f"ratui: starting Spark's JVM ({settings.spark_master}), JIT {jit.describe(settings)}\n".encode())
            said_before = out.tell()
        try:
            try:
                gateway = launch(archive)
            except Exception:
                if not archive.startswith("-XX:SharedArchiveFile="):
                    raise
                # an archive the JVM cannot map (damaged, truncated, from a changed runtime) must never stop Spark:
                # start without it, and set it aside when that works (the next process writes a new one). When the JVM
                # does not start without it either, the archive was not the cause (a Java option the JVM refuses): it
                # stays for the next start
                gateway = launch("")
                class_archive.set_aside(Path(archive.split("=", 1)[1]))
        except Exception as exc:
            failure = spark_errors.jvm_not_started(settings, exc, jvm_out, said_before)
            if "spark.jars.packages" in connector and any(
                    word in str(failure) for word in ("unresolved dependency", "download failed", "ivy")):
                # Spark could not fetch the S3 connector it was asked for (offline, a proxy...)
                raise RatuiError("RAT-S3-005", "Spark could not fetch its S3 connector "
                                 f"(org.apache.hadoop:hadoop-aws:{s3a.hadoop_version()}): "
                                 f"{str(getattr(failure, 'message', failure))[:240]}", hint=s3a.hint()) from None
            raise failure from None
        if archive.startswith("-XX:SharedArchiveFile="):
            class_archive.check_used(Path(archive.split("=", 1)[1]), jvm_out, said_before)
        sc = SparkContext(conf=conf, gateway=gateway)
        sc.setLogLevel("WARN")
        session = SparkSession(sc)
        try:
            session.conf.get("spark.sql.session.timeZone")  # Spark checks the SQL settings when it first reads them
        except Exception as exc:
            sc.stop()
            raise spark_errors.refused_setting(settings, exc) from None
        return session

    # ------------------------------------------------------------------------------------------ where Spark runs

    def describe(self) -> str | None:
        """Where Spark runs and with what, in a user's words, or None before it started: "local[2], 2 cores",
        "cluster spark://127.0.0.1:7077, 1 executor, 2 cores", "Spark Connect sc://127.0.0.1:15002 (server
        local[2])". Asks the driver (never a job); call it off the console's event loop."""
        session = self.session
        if session is None:
            return None
        if self.remote_url is not None:
            master = self.server.get("spark.master")
            return (f"Spark Connect {addresses.display_url(self.remote_url)}"
                    + (f" (server {master})" if master else ""))
        try:
            sc = session.sparkContext
            master = sc.master
            jsc = sc._jsc.sc()
            cores = jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile())
            ignored = f" (SPARK_REMOTE {self.remote_ignored} ignored)" if self.remote_ignored else ""
            if master.startswith("local"):
                return f"{master}, {cores} core{'s' if cores != 1 else ''}{ignored}"
            executors = jsc.getExecutorIds().size()
            where = f"cluster {master}" if master.startswith("spark://") else master
            return (f"{where}, {executors} executor{'s' if executors != 1 else ''}, "
                    f"{cores} core{'s' if cores != 1 else ''}{ignored}")
        except Exception:  # a driver going down: say where, not what
            return None

    def new_session(self, settings: Settings):
        """A session of its own (temp views, SQL settings) on the process's Spark: an ad-hoc query's. Hand it back
        with release() when done (a Connect session holds a server-side session and a connection)."""
        session = self.fresh(self.get_spark(settings))
        self.reach_buckets(session, settings)
        return session

    def reach_buckets(self, session, settings: Settings) -> None:
        """The project's S3 buckets on a session of a JVM of our own (a Connect session got them in fresh()): the
        JVM may have been started for another project of the process (the console reopened, a test process)."""
        if self.remote_url is None:
            _set_all(session, s3a.session_conf(settings))

    def fresh(self, root):
        """A new session on `root`; on Connect it gets ratui's SQL settings and bounded retries, and is released at
        exit if nobody released it before."""
        session = root.newSession()
        if self.remote_url is not None:
            self.retries.bound(session)
            # a new Connect session starts from the server's defaults: ratui's SQL settings again
            _set_all(session, self.session_conf)
            with self.sessions_lock:
                self.all_remote.add(session)
        return session

    def release(self, session) -> None:
        """Done with a session from new_session(): a Connect session's server side and connection go. Nothing to do
        for a session on a JVM of our own (it shares the SparkContext and is garbage-collected)."""
        if session is None or self.remote_url is None or session is self.session:
            return
        with self.sessions_lock:
            self.all_remote.discard(session)
        try:
            session.stop()
        except Exception:  # a server already gone: nothing left to release
            log.debug("releasing a Spark Connect session failed", exc_info=True)

    def collect_garbage(self) -> bool:
        """Ask this process's JVM for a full collection (G1 then gives back what its heap no longer needs, down to
        MaxHeapFreeRatio: launch_conf.LONG_LIVED_JAVA_OPTIONS). False when there is no JVM here (not started, or
        Spark Connect: the server's heap is not ours)."""
        session = self.session
        if session is None or self.remote_url is not None:
            return False
        session.sparkContext._jvm.java.lang.System.gc()
        return True

    def stop(self) -> None:
        with self.lock:
            if self.session is not None:
                if self.remote_url is not None:
                    self._release_all()
                self.session.stop()
                self.session = None
                self.remote_url = None

    def _release_all(self) -> None:
        """Every Connect session still out: released, so no channel is left for the interpreter's exit to close (a
        Connect session closed only by its finalizer at exit can block the exit for good)."""
        with self.sessions_lock:
            sessions = [s for s in list(self.all_remote) if s is not self.session]
            self.run_sessions.clear()
            self.all_remote.clear()
        for session in sessions:
            try:
                session.stop()
            except Exception:
                pass

    def _stop_remote_at_exit(self) -> None:
        if self.remote_url is not None:
            try:
                self.stop()
            except Exception:
                pass


def _set_all(session, values: dict[str, str]) -> None:
    if not values:
        return
    setter = getattr(session.conf, "_set_all", None)
    if setter is not None:
        setter(values, silent=False)  # one round trip
    else:
        for key, value in values.items():
            session.conf.set(key, value)


RUNTIME = SparkRuntime()
atexit.register(RUNTIME._stop_remote_at_exit)

is_started = RUNTIME.is_started
is_remote = RUNTIME.is_remote
on_state = RUNTIME.on_state
get_spark = RUNTIME.get_spark
start_soon = RUNTIME.start_soon
describe = RUNTIME.describe
new_session = RUNTIME.new_session
release = RUNTIME.release
stop = RUNTIME.stop
collect_garbage = RUNTIME.collect_garbage


def startup_seconds() -> float | None:
    return RUNTIME.startup_seconds
