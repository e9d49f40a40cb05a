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
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j_file} -Dlog4j.configurationFile=file:{log4j_file}"
    extra = settings.spark_config.get("spark.driver.extraJavaOptions")
    conf.set("spark.driver.extraJavaOptions", f"{java_opts} {extra}" if extra else java_opts)
    conf.set("spark.local.dir", str(settings.state_dir / "spark-tmp"))

    # the JVM inherits the file as its stdout and stderr; our copy can close once it is started
    with open(settings.log_dir / "jvm.out", "ab") as jvm_out:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": jvm_out, "stderr": jvm_out,
                                                     "stdin": subprocess.DEVNULL})
    sc = SparkContext(conf=conf, gateway=gateway)
    sc.setLogLevel("WARN")
    return SparkSession(sc)


def new_session(settings: Settings):
    """A session of its own (temp views, SQL settings) on the process's Spark: an ad-hoc query's."""
    return get_spark(settings).newSession()


def new_run_session(settings: Settings, run_id: str):
    """A session for one run: isolated temp views, shared context. Call from the thread that runs the jobs."""
    root = get_spark(settings)
    session = root.newSession()
    # a malformed CSV row is found whatever columns the query reads (landing_reader.py)
    session.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
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
