"""What a Spark of ratui's own is started with: the settings ratui requires (of every session, and of its own JVM),
the defaults its JVM gets unless ratui.yaml says otherwise, its log, and the launch configuration of a classic
(JVM) Spark, local or a cluster's driver (session.py starts it; a Spark Connect server gets REQUIRED_CONF too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ratui.engine.spark import addresses, jit, s3a

if TYPE_CHECKING:
    from ratui.engine.project.settings import Settings

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
logger.pools.name = org.apache.spark.scheduler.FairSchedulableBuilder
logger.pools.level = error
"""
# (each run's jobs go to a FAIR pool of the run's own, made on first use with the default weight: Spark warns about
# every such pool it did not read from an allocation file, one line per run that says nothing to a user)

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


# Java options of the warm engine's JVM (a process that serves commands for days; jit.long_lived()): its heap is
# capped by spark.driver.memory (2g unless ratui.yaml says otherwise), and G1 gives back what it no longer uses
# instead of keeping the heap at its high-water mark: a marking cycle shrinks the heap to at most 30% free, and a
# JVM with no collection for a minute (an idle engine) runs one.
LONG_LIVED_JAVA_OPTIONS = "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:G1PeriodicGCInterval=60000"


# Static settings of ratui's own JVM that ratui.yaml cannot turn off: Spark's restricted mode refuses SQL that calls
# any static Java method (reflect, java_method, try_reflect: the JVM's environment and its secrets) or runs a program
# (TRANSFORM ... USING), from pipelines, quality tests and the Query screen alike (run/sql_reach.py names the line
# first for a pipeline).
LAUNCH_REQUIRED_CONF = {
    "spark.sql.restrictedMode.enabled": "true",
}


def classic_launch(settings: Settings, cluster: list[tuple[str, int]]) -> tuple[Any, str, str | None, dict[str, str]]:
    """The launch of a JVM of ratui's own: (its SparkConf, ratui's Java options for the driver, the user's own
    spark.driver.extraJavaOptions, the S3 connector's settings). Writes the JVM's log configuration."""
    from pyspark import SparkConf

    settings.log_dir.mkdir(parents=True, exist_ok=True)
    log_file = settings.log_dir / "spark.log"
    log4j_file = settings.log_dir / "log4j2.properties"
    log4j_file.write_text(LOG4J2.format(log_file=log_file))

    conf = SparkConf(loadDefaults=False)
    conf.setMaster(settings.spark_master).setAppName(f"ratui:{settings.root.name}")
    # the connector's jars and s3://; each bucket's endpoint and key go on every run's and query's session
    # instead (reach_buckets), never into the launch settings: those are the JVM's command line, which any user
    # of this machine can read in the process list
    connector = s3a.launch_conf(settings.spark_config) if s3a.needs_connector(settings) else {}
    for key, value in {**JVM_DEFAULT_CONF, **settings.spark_config, **connector, **REQUIRED_CONF,
                       **LAUNCH_REQUIRED_CONF}.items():
        conf.set(key, value)
    if cluster and all(addresses.is_loopback(h) for h, _p in cluster):
        # a cluster on this machine's loopback: the executors reach the driver there too (by default the driver
        # advertises the machine's address, which a firewall or a loopback-only setup refuses)
        for key in ("spark.driver.host", "spark.driver.bindAddress"):
            if key not in settings.spark_config:
                conf.set(key, "127.0.0.1")
    # a JVM that crashes writes its report with the project's logs, not into the current folder
    java_opts = (f"-Dlog4j2.configurationFile=file:{log4j_file} -Dlog4j.configurationFile=file:{log4j_file} "
                 f"-XX:ErrorFile={settings.log_dir / 'hs_err_pid%p.log'} {jit.java_option(settings)}").rstrip()
    if jit.long_lived():
        java_opts = f"{java_opts} {LONG_LIVED_JAVA_OPTIONS}"
    extra = settings.spark_config.get("spark.driver.extraJavaOptions")
    conf.set("spark.local.dir", str(settings.state_dir / "spark-tmp"))
    # Spark's own default folders (its SQL warehouse, Derby's home) live under .ratui/, never in the folder the
    # command was started from; the JVM itself starts there too, so no relative default lands elsewhere
    if "spark.sql.warehouse.dir" not in settings.spark_config:
        conf.set("spark.sql.warehouse.dir", str(settings.state_dir / "spark-warehouse"))
    java_opts = f"{java_opts} -Dderby.system.home={settings.state_dir / 'derby'}"
    return conf, java_opts, extra, connector
