"""The SparkSession: one per process, started once, kept warm, and silent.

Nothing the JVM prints may reach the terminal (Textual draws on it): the JVM is launched with its stdout
and stderr redirected to a file, log4j2 writes to a file under `.ratui/logs/`, the console progress bar is
off, and PySpark's own Python loggers get a NullHandler. See SPARK_ICEBERG_NOTES.md for why each is needed.

Runs share the session's SparkContext but each gets `new_run_session()`: its own temp views and SQL
settings, its own FAIR scheduler pool, and a job group named after the run so it can be cancelled from
any thread.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ratui.engine.project.settings import Settings

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

_lock = threading.Lock()
_session: Any = None
_started_at: float | None = None
_startup_seconds: float | None = None
_listeners: list[Callable[[str], None]] = []


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
    """The process's SparkSession, started on first use with the project's settings."""
    global _session, _startup_seconds
    if _session is not None:
        return _session
    with _lock:
        if _session is not None:
            return _session
        _notify("starting")
        began = time.monotonic()
        try:
            _session = _start(settings)
        except BaseException:
            _notify("failed")
            raise
        _startup_seconds = time.monotonic() - began
        _notify("ready")
        return _session


def _start(settings: Settings):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    _quiet_python_loggers()
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    settings.log_dir.mkdir(parents=True, exist_ok=True)
    log_file = settings.log_dir / "spark.log"
    log4j_file = settings.log_dir / "log4j2.properties"
    log4j_file.write_text(LOG4J2.format(log_file=log_file))

    conf = SparkConf(loadDefaults=False)
    conf.setMaster(settings.spark_master).setAppName(f"ratui:{settings.root.name}")
    for key, value in settings.spark_config.items():
        conf.set(key, value)
    for key, value in REQUIRED_CONF.items():
        conf.set(key, value)
    # a JVM that crashes writes its report with the project's logs, not into the current folder
    java_opts = (f"-Dlog4j2.configurationFile=file:{log4j_file} -Dlog4j.configurationFile=file:{log4j_file} "
                 f"-XX:ErrorFile={settings.log_dir / 'hs_err_pid%p.log'}")
    extra = settings.spark_config.get("spark.driver.extraJavaOptions")
    conf.set("spark.local.dir", str(settings.state_dir / "spark-tmp"))

    def launch(archive: str):
        opts = f"{java_opts} {archive}".strip()
        conf.set("spark.driver.extraJavaOptions", f"{opts} {extra}" if extra else opts)
        # the JVM inherits the file as its stdout and stderr; our copy can close once it is started
        with open(settings.log_dir / "jvm.out", "ab") as jvm_out:
            return launch_gateway(conf, popen_kwargs={"stdout": jvm_out, "stderr": jvm_out,
                                                      "stdin": subprocess.DEVNULL})

    archive = class_archive_option()
    try:
        gateway = launch(archive)
    except Exception:
        if not archive.startswith("-XX:SharedArchiveFile="):
            raise
        # an archive the JVM cannot map (damaged, truncated, from a changed runtime) must never stop Spark:
        # set it aside and start without it (the next process writes a new one)
        set_aside_archive(Path(archive.split("=", 1)[1]))
        gateway = launch("")
    sc = SparkContext(conf=conf, gateway=gateway)
    sc.setLogLevel("WARN")
    return SparkSession(sc)


# ------------------------------------------------------------------------------------------ class archive
#
# A JVM spends much of its start-up loading and verifying classes (Spark SQL loads over ten thousand before a
# first query finishes). Java's class data sharing maps them from an archive instead: the first Spark of a
# machine writes one when it exits (-XX:ArchiveClassesAtExit, with the classes that process used), and every
# later Spark maps it (-XX:SharedArchiveFile). Measured here: session start plus a first small read, write and
# query 15.5-18.0 s without, 10.9-12.2 s with (benchmarks/README.md). The archive lives in the user's cache
# folder, named after the Java runtime and Spark's jars, so an upgrade of either makes a new one; a JVM that
# refuses an archive says so in .ratui/logs/jvm.out and starts without it; a JVM that crashes on a damaged one
# (cut short) makes ratui set the archive aside (.bad) and start Spark again without it. RATUI_JVM_ARCHIVE=0 turns
# this off.


def _archive_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ratui" / "jvm"


def _archive_name() -> str | None:
    """A name that changes with the Java runtime and Spark's jars (their folder and names), or None when they
    cannot be found."""
    import hashlib
    import shutil

    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    jars = Path(pyspark.__file__).parent / "jars"
    if not java or not os.path.exists(java) or not jars.is_dir():
        return None
    real = os.path.realpath(java)
    digest = hashlib.sha256()
    # the archive is only valid for the class path it was written with: this installation's jars folder
    digest.update(f"{real}:{os.stat(real).st_mtime_ns}:{pyspark.__version__}:{jars.resolve()}".encode())
    for jar in sorted(jars.iterdir()):
        digest.update(jar.name.encode())
    return f"spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jsa"


def class_archive_option() -> str:
    """The JVM option that maps this machine's class archive, or has this JVM write it as it exits when there is
    none yet and no other live process is writing one."""
    if os.environ.get("RATUI_JVM_ARCHIVE", "1") == "0":
        return ""
    try:
        name = _archive_name()
        if name is None:
            return ""
        folder = _archive_dir()
        folder.mkdir(parents=True, exist_ok=True)
        archive = folder / name
        busy = tidy_archives(folder, name)
        if archive.is_file() and archive.stat().st_size > 0:
            return f"-XX:SharedArchiveFile={archive}"
        if busy:
            return ""  # another process will write it: one archive of 100-200 MB at a time
        (folder / f"{name}.{os.getpid()}.claim").touch()
        # written under a name of this process's own; a later start adopts it once this process has ended
        return f"-XX:ArchiveClassesAtExit={folder / f'{name}.{os.getpid()}.part'}"
    except OSError:  # no home folder, a read-only cache: start without an archive
        return ""


def set_aside_archive(archive: Path) -> None:
    """Move an archive a JVM could not start with out of the way (kept as .bad for a look, one at a time)."""
    log.warning("JVM class archive %s could not be used; starting without it", archive)
    try:
        os.replace(archive, archive.with_name(archive.name + ".bad"))
    except OSError:
        pass


# A process that ended this long ago has finished writing its archive (its JVM writes it as it exits).
ARCHIVE_SETTLE_SECONDS = 30.0


def tidy_archives(folder: Path, name: str, now: float | None = None) -> bool:
    """Adopt the archive of an ended process (rename its part into place), remove parts and claims of ended
    processes that are not needed. True when a live process is still to write one."""
    import psutil

    now = time.time() if now is None else now
    busy = False
    for claim in sorted(folder.glob(f"{name}.*.claim")):
        pid_text = claim.name[len(name) + 1:-len(".claim")]
        pid = int(pid_text) if pid_text.isdigit() else -1
        part = folder / f"{name}.{pid_text}.part"
        last = max(claim.stat().st_mtime, part.stat().st_mtime if part.exists() else 0.0)
        if pid > 0 and psutil.pid_exists(pid) or now - last < ARCHIVE_SETTLE_SECONDS:
            busy = True
            continue
        if part.exists():
            _settle(part, folder / name)
        claim.unlink(missing_ok=True)
    for part in sorted(folder.glob(f"{name}.*.part")):  # parts whose claim went first (a JVM slow to exit)
        claimed = part.with_name(part.name[:-len(".part")] + ".claim").exists()
        if claimed or now - part.stat().st_mtime < ARCHIVE_SETTLE_SECONDS:
            continue
        _settle(part, folder / name)
    return busy


def _settle(part: Path, archive: Path) -> None:
    """A finished part becomes the archive when there is none yet; otherwise (or when empty) it goes."""
    if part.stat().st_size > 0 and not archive.exists():
        os.replace(part, archive)
    else:
        part.unlink()


def new_session(settings: Settings):
    """A session of its own (temp views, SQL settings) on the process's Spark: an ad-hoc query's."""
    return get_spark(settings).newSession()


def new_run_session(settings: Settings, run_id: str):
    """A session for one run: isolated temp views, shared context. Call from the thread that runs the jobs."""
    root = get_spark(settings)
    session = root.newSession()
    # a malformed CSV row is found whatever columns the query reads (landing_reader.py)
    session.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
    # a cached batch (a merge reads it two or three times) gets adaptive execution's coalesced partitions too:
    # a 100-row batch is not scanned as spark.sql.shuffle.partitions tasks every time
    session.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    bind_thread(session, run_id)
    return session


def bind_thread(session, run_id: str) -> None:
    """Tag this thread's Spark jobs with the run, so cancel_run() can interrupt them from any thread."""
    sc = session.sparkContext
    sc.setJobGroup(run_id, f"ratui run {run_id}", interruptOnCancel=True)
    sc.setLocalProperty("spark.scheduler.pool", f"run-{run_id}")


def cancel_run(run_id: str) -> None:
    if _session is not None:
        _session.sparkContext.cancelJobGroup(run_id)


def is_cancellation(exc: BaseException) -> bool:
    text = str(exc)
    return "SPARK_JOB_CANCELLED" in text or "cancelled job group" in text or "was cancelled" in text


def stop() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
