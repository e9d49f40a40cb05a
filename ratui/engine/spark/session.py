"""The SparkSession: one per process, started once, kept warm, and silent. The one place that knows how Spark is
reached:

    local[N]            (the default, local[*]) Spark in ratui's own JVM
    spark://HOST:PORT   a standalone cluster: ratui's JVM is the driver, the work runs on the cluster's executors
    sc://HOST:PORT      (spark.remote, or SPARK_REMOTE) a Spark Connect client: no JVM and no py4j gateway in
                        ratui's process; the server runs the driver and owns the executors

Nothing the JVM prints may reach the terminal (Textual draws on it): the JVM is launched with its stdout
and stderr redirected to a file, log4j2 writes to a file under `.ratui/logs/`, the console progress bar is
off, and PySpark's own Python loggers get a NullHandler. See SPARK_ICEBERG_NOTES.md for why each is needed.
A Connect client has no JVM; gRPC's own logging is off unless GRPC_VERBOSITY says otherwise.

Runs share the process's Spark but each gets `new_run_session()`: its own temp views and SQL settings. With a
JVM of our own (local, cluster) a run also gets its own FAIR scheduler pool and a job group named after the run,
set in the run's thread, which `cancel_run()` cancels from any thread through the SparkContext. On Connect a run's
session is a server-side session of its own (`newSession()`), its thread's operations carry the run's tag
(`addTag`), `cancel_run()` interrupts that tag on that session from any thread (`interruptTag`), and `end_run()`
releases the session. Nothing here calls `sparkContext` when the session is remote.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import DEFAULT_SPARK_CONFIG, SETTINGS_FILE, Settings
from ratui.engine.spark import addresses, class_archive, jit
from ratui.engine.spark import errors as spark_errors
from ratui.engine.spark.addresses import display_url, redact  # noqa: F401 - callers name them through session

log = logging.getLogger("ratui.spark")

# Settings ratui needs for correctness; ratui.yaml cannot turn these off.
REQUIRED_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.fieldId.write.enabled": "true",
    "spark.sql.parquet.fieldId.read.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.scheduler.mode": "FAIR",
    "spark.sql.sources.ignoreCorruptFiles": "false",
    # no _SUCCESS marker or summary files in a table's data folder
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.enable.summary-metadata": "false",
    # the raw local file system writes no .crc side files into table folders
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
}

LOG4J2 = """\
status = error
name = ratui
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss.SSS}} %p %c{{1}}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

# Static settings ratui starts its own JVM with unless ratui.yaml sets them. Spark compiles each query stage it
# generates code for and keeps the compiled classes in a cache of 100 by default; a forced run of the ten sample
# pipelines generates about 150, so every run compiled all of its code again and the JIT then compiled those new
# classes too (about half of the JVM's CPU in warm runs, benchmarks/README.md). With room for 1000 the runs of a
# warm process reuse their classes.
JVM_DEFAULT_CONF = {
    "spark.sql.codegen.cache.maxEntries": "1000",
    # PySpark's DataFrame call-site capture: every Column function (col, lit, alias, cast...) also asked the JVM for
    # the active session and a setting, and set and cleared the call site: 9 extra py4j round trips each, about
    # half the 8,000 calls of a forced run of the sample. ratui reports the first line of a Spark error, never
    # that call site.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

# A Spark Connect server runs with its own static settings (the ones above that are not spark.sql.*: see
# connect_server_conf()); a client can only set SQL settings, on each of its sessions.
CONNECT_SESSION_PREFIX = "spark.sql."

# Settings a Spark Connect server needs for ratui (its own static settings: a client cannot set them). Without
# them ratui still works: Spark's extra files in a table folder are removed after each write (files.py), but
# concurrent runs are scheduled first come, first served.
CONNECT_SERVER_CONF = {
    "spark.scheduler.mode": "FAIR",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.enable.summary-metadata": "false",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
}

# How long ratui waits for a Spark Connect server or a cluster master to accept a connection before it gives
# up (the Connect client alone would retry an unreachable server for ten minutes).
CONNECT_TIMEOUT_SECONDS = 5.0

# A Connect server that stops answering mid-run (restarted, gone): how long a call keeps retrying before the run
# fails (the client's default is ten minutes). Backoff 0.05, 0.2, 0.8, 3.2 s, then 10 s: about 44 s in all. Once a
# call has given up, the calls that follow within CONNECT_GONE_SECONDS (the failed run's cleanup: its views, its
# session) try once each instead of waiting as long again.
CONNECT_MAX_RETRIES, CONNECT_MAX_BACKOFF_MS = 8, 10_000
CONNECT_GONE_SECONDS = 60.0
_connect_gone_at: float | None = None

# The code of "Spark cannot be reached"
UNREACHABLE_CODE = "RAT-SPK-001"

_lock = threading.Lock()
_session: Any = None
_started_at: float | None = None
_startup_seconds: float | None = None
_listeners: list[Callable[[str], None]] = []
_refused: tuple[str, str, str | None, int | None, str | None] | None = None  # a ratui.yaml setting Spark refused
# Spark Connect: the server's URL (None when the process runs a JVM of its own), the SQL settings every session
# gets, what the server says about itself, the sessions of each run, and every session handed out (released at exit)
_remote_url: str | None = None
_remote_ignored: str | None = None  # SPARK_REMOTE set in the environment but ratui.yaml named the master
_session_conf: dict[str, str] = {}
_server: dict[str, str] = {}
_run_sessions: dict[str, list[Any]] = {}
_all_remote: "weakref.WeakSet[Any]" = weakref.WeakSet()
_sessions_lock = threading.Lock()


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


def is_started() -> bool:
    return _session is not None


def is_remote() -> bool:
    """True when the process's Spark is a Spark Connect server (no JVM, no SparkContext here)."""
    return _remote_url is not None


def startup_seconds() -> float | None:
    return _startup_seconds


def on_state(listener: Callable[[str], None]) -> Callable[[], None]:
    """Be told "starting" / "ready" / "failed" (the console's footer shows it). Returns an unsubscribe."""
    _listeners.append(listener)

    def unsubscribe() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return unsubscribe


def _notify(state: str) -> None:
    for listener in list(_listeners):
        try:
            listener(state)
        except Exception:  # a listener's failure must not break Spark start-up
            log.exception("spark state listener failed")


def get_spark(settings: Settings):
    """The process's SparkSession, started on first use with the project's settings. A setting Spark refused is
    refused again without starting another JVM (settings are read once per process)."""
    global _session, _startup_seconds, _refused, _soon_failed, _wanted
    if threading.current_thread() is not _soon:
        _wanted = True
    if _session is not None:
        return _session
    with _lock:
        if _session is not None:
            return _session
        if _refused is not None:
            raise RatuiError(*_refused[:2], file=_refused[2], line=_refused[3], hint=_refused[4])
        if _soon_failed is not None and threading.current_thread() is not _soon:
            # the start on the side has just failed (an unreachable master, say): its caller gets that failure
            # instead of waiting for a second attempt; a later call tries again
            failed, _soon_failed = _soon_failed, None
            raise failed
        _notify("starting")
        began = time.monotonic()
        try:
            _session = _start(settings)
        except BaseException as exc:
            if isinstance(exc, RatuiError) and exc.code in ("RAT-CFG-007", spark_errors.JVM_NOT_STARTED):
                _refused = (exc.code, exc.message, exc.file, exc.line, exc.hint)
            if threading.current_thread() is _soon:
                _soon_failed = exc
            _notify("failed")
            raise
        _startup_seconds = time.monotonic() - began
        _notify("ready")
        return _session


_soon: threading.Thread | None = None  # a start on the side (start_soon), once asked for
_soon_failed: BaseException | None = None  # how it failed, for the next get_spark() of another thread
_wanted = False  # whether anything but the start on the side has asked for the session


def start_soon(settings: Settings) -> None:
    """Start Spark now on a thread of its own: the JVM boots while the caller goes on (imports, opens the catalog,
    creates the run's branch), and get_spark() waits for it. A start that fails there fails the next get_spark()
    of another thread the same way (once: later calls try again). Call it only when a run is about to need Spark:
    a JVM nobody uses still boots (it ends when the process does)."""
    global _soon
    with _lock:
        if _session is not None or _soon is not None or settings.spark_remote:
            return  # started; a Connect client has no JVM to boot

        def start() -> None:
            try:
                get_spark(settings)
            except BaseException:  # kept for the run's own get_spark(), which reports it
                log.debug("Spark start on the side failed", exc_info=True)

        _soon = threading.Thread(target=start, name="ratui-spark-start", daemon=True)
        _soon.start()
        atexit.register(_kill_unwanted_jvm)


# the launch of a JVM is a chain: spark-submit (a shell script) execs spark-class, whose launcher JVM prints the
# command the script then execs as the driver JVM
LAUNCH_PARTS = ("spark-submit", "spark-class", "org.apache.spark.deploy.SparkSubmit",
                "org.apache.spark.launcher.Main")


def _kill_unwanted_jvm() -> None:
    """At exit: a JVM started on the side that no run asked for (the run failed or was interrupted before it
    needed Spark) is killed, every link of its launch. Left alone it would end by itself, but as a JVM that did no
    work it would first write the machine's class archive, when it is the one to write it, and every later
    start would map that poor archive."""
    if not _wanted:
        _kill_launch_chain()


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


_did_work = False  # whether a pipeline or a query ran on this process's JVM (bind_thread)
_archive_hooks: list[bool] = []  # the exit hooks of the JVM that writes the class archive, registered once


def _ran_jobs() -> bool:
    """Whether the JVM ran a Spark job outside ratui's runs and queries (those have a job group: _did_work)."""
    session = _session
    if session is None:
        return False
    try:
        return bool(session.sparkContext.statusTracker().getJobIdsForGroup(None))
    except Exception:  # cannot tell: let it write
        return True


def _no_archive_of_an_idle_jvm() -> None:
    """At exit: a JVM that is to write the machine's class archive but ran no pipeline and no query (a console
    opened and closed, a run that failed before its Spark work) is killed before it can, and its claim goes: an
    archive of a JVM's start alone holds about half the classes a run needs (111 MB against 194 MB), and every
    later JVM of this installation would map it (measured: a cold `ratui run` 1.4 s slower, 6.67 s vs 5.30 s).
    The next JVM that works writes the archive instead."""
    if _did_work or class_archive.writing is None or _ran_jobs():
        return
    _kill_launch_chain()
    for path in class_archive.writing:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


ARCHIVE_WAIT_SECONDS = 120.0  # the longest a command waits for its JVM to write the class archive as it exits


def _write_archive_in_view() -> None:
    """At exit, when this process's JVM is the one to write the installation's class archive: the command waits for
    it (bounded, the JVM at low priority), saying so on a terminal, instead of returning while an orphaned JVM
    writes 100-200 MB for tens of seconds. Ctrl-C, or the bound, stops the JVM and drops its part: the next JVM
    that works writes the archive instead."""
    if class_archive.writing is None:
        return
    try:
        from pyspark import SparkContext

        process = getattr(SparkContext._gateway, "proc", None)
    except Exception:  # noqa: BLE001 - no classic Spark in this process
        return
    if process is None or process.poll() is not None:
        return
    claim, part = class_archive.writing
    terminal = sys.stderr is not None and sys.stderr.isatty()

    def say(text: str) -> None:
        if terminal:
            try:
                print(f"ratui: {text}", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass

    began = time.monotonic()
    try:
        os.setpriority(os.PRIO_PROCESS, process.pid, 10)
    except (OSError, AttributeError):
        pass
    say(f"Spark is writing this installation's class archive as it exits (once; later starts are faster); waiting "
        f"up to {ARCHIVE_WAIT_SECONDS:.0f} s, Ctrl-C skips it")
    try:
        try:
            stop()
        except Exception:  # noqa: BLE001 - the JVM exits below all the same
            pass
        try:
            if process.stdin is not None:
                process.stdin.close()  # the JVM's signal to exit (PySpark's launcher watches its stdin)
        except OSError:
            pass
        process.wait(ARCHIVE_WAIT_SECONDS)
        try:  # written and closed: in place now, for the very next start
            if part.exists():
                class_archive.settle(part, part.with_name(part.name.split(".jsa.", 1)[0] + ".jsa"))
            claim.unlink(missing_ok=True)
        except OSError:
            pass
        say(f"class archive written in {time.monotonic() - began:.1f} s")
    except (KeyboardInterrupt, subprocess.TimeoutExpired) as reason:
        process.kill()
        process.wait()
        for path in (claim, part):
            path.unlink(missing_ok=True)
        say("class archive skipped (" + ("Ctrl-C" if isinstance(reason, KeyboardInterrupt) else "too slow")
            + "): a later run writes it")


def _start(settings: Settings):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if settings.spark_remote:
        return _start_connect(settings)
    return _start_classic(settings)


def _start_classic(settings: Settings):
    """Spark in a JVM of ratui's own: local, or the driver of a standalone (or any other) cluster."""
    global _remote_ignored
    _quiet_python_loggers()
    if os.environ.pop("SPARK_REMOTE", None):
        # ratui.yaml names the master: a Connect URL exported in the user's shell must not reach PySpark's launcher
        # (spark-submit refuses a remote beside a master) nor its session builder (which would go remote)
        _remote_ignored = settings.spark_remote_ignored or "SPARK_REMOTE"
    master = settings.spark_master
    if master.startswith("spark://"):
        for host, port in addresses.master_addresses(master):
            _check_reachable(host, port, f"Spark master {master}", "spark.master")
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    settings.log_dir.mkdir(parents=True, exist_ok=True)
    log_file = settings.log_dir / "spark.log"
    log4j_file = settings.log_dir / "log4j2.properties"
    log4j_file.write_text(LOG4J2.format(log_file=log_file))

    conf = SparkConf(loadDefaults=False)
    conf.setMaster(settings.spark_master).setAppName(f"ratui:{settings.root.name}")
    for key, value in {**JVM_DEFAULT_CONF, **settings.spark_config, **REQUIRED_CONF}.items():
        conf.set(key, value)
    if master.startswith("spark://") and all(addresses.is_loopback(h) for h, _p in addresses.master_addresses(master)):
        # a cluster on this machine's loopback: the executors reach the driver there too (by default the driver
        # advertises the machine's address, which a firewall or a loopback-only setup refuses)
        for key in ("spark.driver.host", "spark.driver.bindAddress"):
            if key not in settings.spark_config:
                conf.set(key, "127.0.0.1")
    # a JVM that crashes writes its report with the project's logs, not into the current folder
    java_opts = (f"-Dlog4j2.configurationFile=file:{log4j_file} -Dlog4j.configurationFile=file:{log4j_file} "
                 f"-XX:ErrorFile={settings.log_dir / 'hs_err_pid%p.log'} {jit.java_option(settings)}").rstrip()
    extra = settings.spark_config.get("spark.driver.extraJavaOptions")
    conf.set("spark.local.dir", str(settings.state_dir / "spark-tmp"))
    # Spark's own default folders (its SQL warehouse, Derby's home) live under .ratui/, never in the folder the
    # command was started from; the JVM itself starts there too, so no relative default lands elsewhere
    if "spark.sql.warehouse.dir" not in settings.spark_config:
        conf.set("spark.sql.warehouse.dir", str(settings.state_dir / "spark-warehouse"))
    java_opts = f"{java_opts} -Dderby.system.home={settings.state_dir / 'derby'}"

    def launch(archive: str):
        opts = f"{java_opts} {archive}".strip()
        conf.set("spark.driver.extraJavaOptions", f"{opts} {extra}" if extra else opts)
        # the JVM inherits the file as its stdout and stderr; our copy can close once it is started
        with open(settings.log_dir / "jvm.out", "ab") as jvm_out:
            return launch_gateway(conf, popen_kwargs={"stdout": jvm_out, "stderr": jvm_out,
                                                      "stdin": subprocess.DEVNULL, "cwd": str(settings.state_dir)})

    archive = class_archive.option(settings.spark_config.get("spark.driver.extraClassPath", ""))
    if class_archive.writing is not None and not _archive_hooks:
        _archive_hooks.append(True)
        atexit.register(_write_archive_in_view)  # runs after the one below (atexit is last in, first out)
        atexit.register(_no_archive_of_an_idle_jvm)
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
        raise spark_errors.jvm_not_started(settings, exc, jvm_out, said_before) from None
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


# ------------------------------------------------------------------------------------------ Spark Connect


def _start_connect(settings: Settings):
    """A Spark Connect client: no JVM and no py4j gateway in this process. The SQL settings ratui needs (and
    ratui.yaml's spark.sql.* ones) are set on every session; the server's static settings are its own
    (connect_server_conf)."""
    global _remote_url, _session_conf, _server
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's C core would print to the terminal the console draws on
    # a call that gives up says so with a warning on stderr as well as with its error
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]", category=UserWarning)
    _quiet_python_loggers()
    _quiet_connect_client(settings)
    url = settings.spark_remote
    assert url is not None
    host, port = addresses.remote_address(url)
    _check_token_route(url, settings)
    _check_reachable(host, port, f"Spark Connect server {addresses.display_url(url)}", "spark.remote")
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.builder.remote(url).create()
        _bounded_retries(session)
    except Exception as exc:  # e.g. PACKAGE_NOT_INSTALLED: the connect extra is missing
        raise RatuiError(UNREACHABLE_CODE, f"cannot start a Spark Connect client for {addresses.display_url(url)}: "
                         f"{addresses.redact(_first_line(exc))}", file=str(settings.root / SETTINGS_FILE),
                         hint="Install ratui's connect extra (pip install 'ratui[connect]', which brings "
                              "pyspark[connect]).") from None
    _check_authenticated(session, url, settings)
    wanted = {k: v for k, v in {**settings.spark_config, **REQUIRED_CONF}.items()
              if k.startswith(CONNECT_SESSION_PREFIX)}
    applied: dict[str, str] = {}
    notes = []
    for key, value in wanted.items():
        try:
            session.conf.set(key, value)
            applied[key] = value
        except Exception as exc:  # a static SQL setting (spark.sql.warehouse.dir, ...): the server's value holds
            notes.append(f"{key} is the server's to set ({_first_line(exc)})")
    ignored = sorted(k for k, v in settings.spark_config.items()
                     if not k.startswith(CONNECT_SESSION_PREFIX) and DEFAULT_SPARK_CONFIG.get(k) != v)
    if ignored:
        notes.append(f"ratui.yaml settings the server owns, not applied: {', '.join(ignored)}")
    server = {}
    for key in ("spark.master", "spark.app.name", *CONNECT_SERVER_CONF):
        server[key] = session.conf.get(key, None) or ""
    server["version"] = session.version
    for key, value in CONNECT_SERVER_CONF.items():
        if server.get(key, "").lower() != value.lower():
            notes.append(f"the server runs with {key}={server.get(key) or '(unset)'}; ratui wants {value}")
    _log_to_file(settings, [f"Spark Connect {addresses.display_url(url)}: server Spark {server['version']}, master "
                            f"{server['spark.master']}"] + notes)
    with _sessions_lock:
        _all_remote.add(session)
    _session_conf, _server, _remote_url = applied, server, url
    return session


def _bounded_retries(session) -> None:
    """A Connect session whose calls give up after about 44 s of retries, not the client's ten minutes, and try only
    once while the server is known to be gone."""
    try:
        session.client.set_retry_policies([_retry_policy()])
    except Exception:  # another client version: its own policy holds
        log.debug("could not bound the Spark Connect client's retries", exc_info=True)


_policy_class: Any = None


def _retry_policy():
    global _policy_class
    if _policy_class is None:
        from pyspark.sql.connect.client.retries import DefaultPolicy, RetryPolicyState

        class GiveUpState(RetryPolicyState):
            def next_attempt(self, exception=None):
                global _connect_gone_at
                wait = super().next_attempt(exception)
                if wait is None:  # this call gave up: the server is gone for now
                    _connect_gone_at = time.monotonic()
                return wait

        class RatuiPolicy(DefaultPolicy):
            def can_retry(self, exception: BaseException) -> bool:
                gone = _connect_gone_at
                if gone is not None and time.monotonic() - gone < CONNECT_GONE_SECONDS:
                    return False
                return super().can_retry(exception)

            def to_state(self):
                return GiveUpState(self)

        _policy_class = RatuiPolicy
    return _policy_class(max_retries=CONNECT_MAX_RETRIES, max_backoff=CONNECT_MAX_BACKOFF_MS)


TOKEN_CODE = "RAT-SPK-003"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # PySpark's own: the client sends it, a server started with it wants it


def _check_token_route(url: str, settings: Settings) -> None:
    """PySpark sends a token without TLS only to the name `localhost` (gRPC's local credentials); to any other
    name it opens TLS, which a plain server answers with handshake failures and retries for a minute. Said at
    once instead, with the fix."""
    params = addresses.url_params(url)
    has_token = bool(params.get("token") or os.environ.get(TOKEN_ENV))
    host = urlparse(url).hostname or "localhost"
    if has_token and params.get("use_ssl", "").lower() != "true" and host != "localhost":
        where = "in spark.remote" if params.get("token") else f"in {TOKEN_ENV}"
        raise RatuiError(TOKEN_CODE, f"a Spark Connect token ({where}) is sent only to sc://localhost or over TLS, "
                         f"and {addresses.display_url(url)} names {host} without use_ssl=true",
                         file=str(settings.root / SETTINGS_FILE),
                         hint="For a server on this machine write sc://localhost:PORT (its token is then sent over "
                              "the loopback connection only); for another machine, serve TLS and add ;use_ssl=true.")


def _check_authenticated(session, url: str, settings: Settings) -> None:
    """The first call to the server: a refused token (or none given to a server that wants one) is RAT-SPK-003
    naming the cause, never the token."""
    try:
        session.version  # noqa: B018 - a call to the server
    except Exception as exc:
        message = addresses.redact(_first_line(exc))
        if "UNAUTHENTICATED" in message or "UNAUTHENTICATED" in str(exc):
            _close_quietly(session)
            given = bool(addresses.url_params(url).get("token") or os.environ.get(TOKEN_ENV))
            cause = ("refused the token ratui gave it" if given else "wants a token and ratui gave none")
            raise RatuiError(TOKEN_CODE, f"the Spark Connect server {addresses.display_url(url)} {cause}: {message}",
                             file=str(settings.root / SETTINGS_FILE)) from None
        raise


def _close_quietly(session) -> None:
    try:
        session.stop()
    except Exception:  # noqa: BLE001 - it never authenticated: nothing to release on the server
        pass


def connect_server_conf() -> dict[str, str]:
    """The static settings a Spark Connect server should run with for ratui (README: Beyond one machine)."""
    return dict(CONNECT_SERVER_CONF)


def _quiet_connect_client(settings: Settings) -> None:
    """The Connect client logs (when SPARK_CONNECT_LOG_LEVEL asks for it) to a file, never to the terminal."""
    client_logger = logging.getLogger("pyspark.sql.connect.logging")
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(settings.log_dir / "spark-connect.log", encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(funcName)s %(message)s"))
    handler.addFilter(_Redacted())
    client_logger.handlers[:] = [handler]
    client_logger.propagate = False


class _Redacted(logging.Filter):
    """A record's text with any token replaced by *** (the client logs its connection string when asked to)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.msg, record.args = addresses.redact(record.getMessage()), None
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is logged as it is
            pass
        return True


def _log_to_file(settings: Settings, lines: list[str]) -> None:
    """A few lines in .ratui/logs/spark.log (where a JVM of our own writes its log)."""
    try:
        settings.log_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(settings.log_dir / "spark.log", "a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(f"{stamp} INFO ratui.spark: {line}\n")
    except OSError:
        pass


def _check_reachable(host: str, port: int, what: str, setting: str) -> None:
    """Fail fast, with a coded error, when nothing listens where ratui.yaml says Spark is."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise RatuiError(UNREACHABLE_CODE, f"{what} is not reachable: {reason}",
                     hint=f"Start it, or point {setting} in {SETTINGS_FILE} (or SPARK_REMOTE) at a running one.")


def _first_line(exc: BaseException) -> str:
    from ratui.engine.spark.errors import error_message

    return error_message(exc)


# ------------------------------------------------------------------------------------------ where Spark runs


def describe() -> str | None:
    """Where Spark runs and with what, in a user's words, or None before it started: "local[2], 2 cores",
    "cluster spark://127.0.0.1:7077, 1 executor, 2 cores", "Spark Connect sc://127.0.0.1:15002 (server local[2])".
    Asks the driver (never a job); call it off the console's event loop."""
    session = _session
    if session is None:
        return None
    if _remote_url is not None:
        master = _server.get("spark.master")
        return f"Spark Connect {addresses.display_url(_remote_url)}" + (f" (server {master})" if master else "")
    try:
        sc = session.sparkContext
        master = sc.master
        jsc = sc._jsc.sc()
        cores = jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile())
        ignored = f" (SPARK_REMOTE {_remote_ignored} ignored)" if _remote_ignored else ""
        if master.startswith("local"):
            return f"{master}, {cores} core{'s' if cores != 1 else ''}{ignored}"
        executors = jsc.getExecutorIds().size()
        where = f"cluster {master}" if master.startswith("spark://") else master
        return (f"{where}, {executors} executor{'s' if executors != 1 else ''}, "
                f"{cores} core{'s' if cores != 1 else ''}{ignored}")
    except Exception:  # a driver going down: say where, not what
        return None


def new_session(settings: Settings):
    """A session of its own (temp views, SQL settings) on the process's Spark: an ad-hoc query's. Hand it back with
    release() when done (a Connect session holds a server-side session and a connection)."""
    return _fresh(get_spark(settings))


def _fresh(root):
    session = root.newSession()
    if _remote_url is not None:
        _bounded_retries(session)
        # a new Connect session starts from the server's defaults: ratui's SQL settings again
        _set_all(session, _session_conf)
        with _sessions_lock:
            _all_remote.add(session)
    return session


def _set_all(session, values: dict[str, str]) -> None:
    if not values:
        return
    setter = getattr(session.conf, "_set_all", None)
    if setter is not None:
        setter(values, silent=False)  # one round trip
    else:
        for key, value in values.items():
            session.conf.set(key, value)


def release(session) -> None:
    """Done with a session from new_session(): a Connect session's server side and connection go. Nothing to do
    for a session on a JVM of our own (it shares the SparkContext and is garbage-collected)."""
    if session is None or _remote_url is None or session is _session:
        return
    with _sessions_lock:
        _all_remote.discard(session)
    try:
        session.stop()
    except Exception:  # a server already gone: nothing left to release
        log.debug("releasing a Spark Connect session failed", exc_info=True)


def new_run_session(settings: Settings, run_id: str):
    """A session for one run: isolated temp views, shared context. Call from the thread that runs the jobs."""
    root = get_spark(settings)
    session = _fresh(root)
    # a malformed CSV row is found whatever columns the query reads (landing_reader.py)
    session.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
    # a cached batch (a merge reads it two or three times) gets adaptive execution's coalesced partitions too:
    # a 100-row batch is not scanned as spark.sql.shuffle.partitions tasks every time
    session.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    bind_thread(session, run_id)
    return session


# Spark Connect: the latest progress report of each run's (or query's) operation, and the operations it finished
_remote_progress: dict[str, dict[str, Any]] = {}
_remote_jobs_done: dict[str, int] = {}


def progress(run_id: str) -> dict[str, Any] | None:
    """What the run's (or query's) Spark jobs are doing now: jobs done, the running jobs' stages and tasks (done,
    running, total), as SparkProgress's fields; None when Spark is not up or nothing of the run has started. Never
    starts Spark. From Spark's status tracker (job group = run id) or, on Spark Connect, the server's progress
    reports."""
    if _session is None:
        return None
    if _remote_url is not None:
        with _sessions_lock:
            latest = _remote_progress.get(run_id)
            done = _remote_jobs_done.get(run_id, 0)
        if latest is None:
            return None if not done else _progress_fields(done, 0, 0, 0, 0, 0, 0, None)
        return dict(latest, jobs_done=done)
    tracker = _session.sparkContext.statusTracker()
    jobs_done = jobs_running = stages_done = stages_total = tasks_done = tasks_running = tasks_total = 0
    job_ids = tracker.getJobIdsForGroup(run_id)
    if not job_ids:
        return None
    for job_id in job_ids:
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        if job.status == "SUCCEEDED":
            jobs_done += 1
            continue
        if job.status != "RUNNING":
            continue
        jobs_running += 1
        for stage_id in job.stageIds:
            stages_total += 1
            stage = tracker.getStageInfo(stage_id)
            if stage is None:  # not submitted yet (or skipped: its output was there already)
                continue
            tasks_total += stage.numTasks
            tasks_done += stage.numCompletedTasks
            tasks_running += stage.numActiveTasks
            if stage.numTasks and stage.numCompletedTasks >= stage.numTasks:
                stages_done += 1
    return _progress_fields(jobs_done, jobs_running, stages_done, stages_total, tasks_done, tasks_running,
                            tasks_total, None)


def _progress_fields(jobs_done, jobs_running, stages_done, stages_total, tasks_done, tasks_running, tasks_total,
                     bytes_read) -> dict[str, Any]:
    return {"jobs_done": jobs_done, "jobs_running": jobs_running, "stages_done": stages_done,
            "stages_total": stages_total, "tasks_done": tasks_done, "tasks_running": tasks_running,
            "tasks_total": tasks_total, "bytes_read": bytes_read}


def _remote_progress_handler(run_id: str) -> Callable[..., None]:
    def handler(stages, inflight_tasks, operation_id, done, **_ignored) -> None:
        stages = list(stages or ())
        report = _progress_fields(0, 0 if done else 1, sum(1 for s in stages if s.done), len(stages),
                                  sum(s.num_completed_tasks for s in stages), inflight_tasks,
                                  sum(s.num_tasks for s in stages), sum(s.num_bytes_read for s in stages))
        with _sessions_lock:
            if done:
                _remote_progress.pop(run_id, None)
                _remote_jobs_done[run_id] = _remote_jobs_done.get(run_id, 0) + 1
            else:
                _remote_progress[run_id] = report

    return handler


def run_tag(run_id: str) -> str:
    """The Spark job tag of a run's operations (Spark Connect)."""
    return f"ratui-run-{run_id}"


def bind_thread(session, run_id: str) -> None:
    """Tag this thread's Spark jobs with the run, so cancel_run() can interrupt them from any thread."""
    global _did_work
    _did_work = True  # a pipeline or a query: this JVM may write the class archive (_no_archive_of_an_idle_jvm)
    if _remote_url is not None:
        # Connect: tags are per thread of the client; the server interrupts a tag within one session
        session.addTag(run_tag(run_id))
        with _sessions_lock:
            sessions = _run_sessions.setdefault(run_id, [])
            known = any(s is session for s in sessions)
            if not known:
                sessions.append(session)
        if not known:
            try:  # the server's progress reports of this session's operations (progress())
                session.registerProgressHandler(_remote_progress_handler(run_id))
            except Exception:  # a client without progress reports: no live bar, the run goes on
                log.debug("no Spark Connect progress handler", exc_info=True)
        return
    sc = session.sparkContext
    sc.setJobGroup(run_id, f"ratui run {run_id}", interruptOnCancel=True)
    sc.setLocalProperty("spark.scheduler.pool", f"run-{run_id}")


def cancel_run(run_id: str) -> None:
    """Interrupt the run's running Spark jobs (from any thread)."""
    if _session is None:
        return
    if _remote_url is not None:
        with _sessions_lock:
            sessions = list(_run_sessions.get(run_id, ()))
        for session in sessions:
            try:
                session.interruptTag(run_tag(run_id))
            except Exception:  # the run's session already released: nothing runs there
                log.debug("interrupting %s failed", run_id, exc_info=True)
        return
    _session.sparkContext.cancelJobGroup(run_id)


def end_run(run_id: str) -> None:
    """The run ended: its Connect sessions are released (their server-side state, temp views and cached batches
    go). Nothing to do on a JVM of our own."""
    with _sessions_lock:
        sessions = _run_sessions.pop(run_id, [])
        _remote_progress.pop(run_id, None)
        _remote_jobs_done.pop(run_id, None)
    for session in sessions:
        release(session)


# What an interrupted job says: a cancelled job group or tag (a JVM of our own), an interrupted operation (Connect)
CANCELLATION_TEXTS = ("SPARK_JOB_CANCELLED", "cancelled job group", "was cancelled", "OPERATION_CANCELED",
                      "cancelled because it was part of cancelled job tags", "cancelled job tag")


CANCELLATION_CONDITIONS = ("SPARK_JOB_CANCELLED", "OPERATION_CANCELED", "OPERATION_CANCELLED")


def is_cancellation(exc: BaseException) -> bool:
    """Spark stopped the work because it was asked to: said by PySpark 4's error condition where there is one, by
    the message's words for a Py4J error (which has none)."""
    condition = spark_errors.error_condition(exc)
    if condition is not None and condition.split(".", 1)[0] in CANCELLATION_CONDITIONS:
        return True
    text = str(exc)
    return any(marker in text for marker in CANCELLATION_TEXTS)


# What a Spark that went away says: a Connect server that stopped answering (errors.py words it), a JVM of our own
# that died or was stopped
UNREACHABLE_TEXTS = ("Spark Connect server unreachable", "SparkContext was shut down",
                     "Cannot call methods on a stopped SparkContext", "Answer from Java side is empty")


def is_unreachable(exc: BaseException) -> bool:
    """Spark itself went away during the work (not the pipeline's fault, nor its data's)."""
    from ratui.engine.spark.errors import error_message

    if type(exc).__name__ == "Py4JNetworkError":
        return True
    text = f"{error_message(exc)}\n{exc}"
    return any(marker in text for marker in UNREACHABLE_TEXTS)


def stop() -> None:
    global _session, _remote_url
    with _lock:
        if _session is not None:
            if _remote_url is not None:
                _release_all()
            _session.stop()
            _session = None
            _remote_url = None


def _release_all() -> None:
    """Every Connect session still out: released, so no channel is left for the interpreter's exit to close (a
    Connect session closed only by its finalizer at exit can block the exit for good)."""
    with _sessions_lock:
        sessions = [s for s in list(_all_remote) if s is not _session]
        _run_sessions.clear()
        _all_remote.clear()
    for session in sessions:
        try:
            session.stop()
        except Exception:
            pass


@atexit.register
def _stop_remote_at_exit() -> None:
    if _remote_url is not None:
        try:
            stop()
        except Exception:
            pass
