"""What a team's Spark servers need for ratui, and the commands that start them: declared once.

docs/generate.py writes these commands into docs/team/spark.md and docs/team/s3.md (BLOCKS: what a team copies),
and tests/servers.py starts every Spark Connect server and standalone cluster of the tests by running the same
scripts, rendered with the test's own port and folders (and a few settings of the tests' own, which the function
names `extra`): what the docs tell a team is what the tests run, the S3A jars of s3a.CONNECTOR and nothing more.

    CONNECT_SERVER_CONF      the static settings a Spark Connect server needs for ratui (a client cannot set them)
    LOOPBACK_CONF, LOOPBACK_ENV   a server that listens on 127.0.0.1 only: its gRPC port, its driver, no UI
    connect_script()         pyspark's sbin/start-connect-server.sh with all of them, and S3A's jars
    master_script(), worker_script()   a standalone Master and Worker from pyspark's own distribution
    fetch_lines()            `mvn dependency:get` of each jar S3A needs
    FAIR_POOLS               the pool file that makes the FAIR scheduler's default pool FAIR too

The scripts are shell text (bash): `$SPARK_HOME` and `$HOME` stay variables in the docs; a test gives values.
"""

from __future__ import annotations

from pathlib import Path

from ratui.engine.shell_text import command, exports, word
from ratui.engine.spark import s3a

LOOPBACK = "127.0.0.1"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # read by the server and by PySpark's client alike
CONNECT_PORT = 15002  # Spark Connect's default port
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

# Settings a Spark Connect server needs for ratui (its own static settings: a client cannot set them). Without
# them ratui still works: Spark's extra files in a table folder are removed after each write (write/files.py), but
# concurrent runs are scheduled first come, first served.
CONNECT_SERVER_CONF = {
    "spark.scheduler.mode": "FAIR",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.enable.summary-metadata": "false",
}

# A server on this machine's loopback only: the gRPC port, the driver's RPC and block manager, and no web UI (Spark's
# UI binds SPARK_LOCAL_IP when it is on, 0.0.0.0 otherwise: LOOPBACK_ENV keeps a UI turned on there on loopback too)
LOOPBACK_CONF = {
    "spark.connect.grpc.binding.address": LOOPBACK,
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.ui.enabled": "false",
}
LOOPBACK_ENV = {"SPARK_LOCAL_IP": LOOPBACK}

# The FAIR scheduler's default pool is FIFO inside: every Connect session shares it, so it is made FAIR.
FAIR_POOLS = """<?xml version="1.0"?>
<allocations>
  <pool name="default"><schedulingMode>FAIR</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
</allocations>
"""

DOC_SPARK_HOME = "$SPARK_HOME"
DOC_REPO = "$HOME/.m2/repository"
SPARK_HOME_LINE = "SPARK_HOME=$(.venv/bin/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')"
TOKEN_LINE = f"export {TOKEN_ENV}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"


def jar_lines(repo: str = DOC_REPO, without: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """Shell lines that put S3A's jars (s3a.CONNECTOR, as the local Maven repository `repo` keeps them) in $JARS,
    comma-separated, and the word that names them. `without`: artifacts left out (a test's server lacking one)."""
    paths = [f"{repo}/{jar.path('').as_posix().lstrip('/')}" for jar in s3a.connector_jars()
             if jar.artifact not in without]
    lines = [f"JARS={word(paths[0])}"] + [f"JARS=$JARS,{word(p)}" for p in paths[1:]]
    return lines, "$JARS"


def connect_script(*, spark_home: str = DOC_SPARK_HOME, port: int = CONNECT_PORT, repo: str = DOC_REPO,
                   pools: str = "$PWD/fairscheduler.xml", extra: list[str] | None = None,
                   without: tuple[str, ...] = ()) -> str:
    """The Spark Connect server ratui needs: loopback only, ratui's server settings, S3A's jars. pyspark's script
    starts it in the background (its log under $SPARK_HOME/logs; sbin/stop-connect-server.sh stops it), or in the
    foreground with SPARK_NO_DAEMONIZE=1 (as the tests run it). The token comes from the environment (TOKEN_ENV,
    never the command line). `extra`: more spark-submit words (a test's master, memory, compiler)."""
    conf = {**LOOPBACK_CONF, "spark.connect.grpc.binding.port": str(port), **CONNECT_SERVER_CONF,
            "spark.scheduler.allocation.file": pools}
    argv = [f"{spark_home}/sbin/start-connect-server.sh"]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    lines, jars = jar_lines(repo, without)
    argv += [*(extra or []), "--jars", jars]
    return "\n".join([loopback_exports(), *lines, command(argv)])


def master_script(*, spark_home: str = DOC_SPARK_HOME, port: int = 7077, webui_port: int | None = None) -> str:
    """A standalone Master on loopback (the exports of LOOPBACK_ENV first)."""
    argv = [f"{spark_home}/bin/spark-class", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
            "--port", str(port)]
    if webui_port is not None:
        argv += ["--webui-port", str(webui_port)]
    return " ".join(word(w) for w in argv)


def worker_script(master_url: str = f"spark://{LOOPBACK}:7077", *, spark_home: str = DOC_SPARK_HOME, cores: int = 2,
                  memory: str = "2g", webui_port: int | None = None, work_dir: str | None = None) -> str:
    """A standalone Worker of that Master, on loopback (the exports of LOOPBACK_ENV first)."""
    argv = [f"{spark_home}/bin/spark-class", "org.apache.spark.deploy.worker.Worker", master_url, "--host", LOOPBACK,
            "--cores", str(cores), "--memory", memory]
    if webui_port is not None:
        argv += ["--webui-port", str(webui_port)]
    if work_dir is not None:
        argv += ["--work-dir", work_dir]
    return " ".join(word(w) for w in argv)


def loopback_exports() -> str:
    """The environment every server of the docs starts with (LOOPBACK_ENV), as shell lines."""
    return "\n".join(exports(LOOPBACK_ENV))


def fetch_lines() -> list[str]:
    """`mvn dependency:get` of each jar S3A needs, into the local Maven repository (~/.m2)."""
    return [f"mvn -q dependency:get -Dartifact={jar.coordinates} -Dtransitive=false" for jar in s3a.connector_jars()]


def _fenced(lang: str, text: str) -> str:
    return f"```{lang}\n{text.rstrip()}\n```"


def blocks() -> dict[str, str]:
    """The Markdown blocks docs/generate.py writes between `<!-- generated: NAME -->` and `<!-- end: NAME -->` in
    docs/team/*.md."""
    named = ",".join(f"/opt/jars/{jar.file_name}" for jar in s3a.connector_jars())
    return {
        "s3a-jars": _fenced("sh", "\n".join(fetch_lines())),
        "s3a-spark-jars": _fenced("yaml", f"spark:\n  config:\n    spark.jars: {named}   # ratui adds nothing when "
                                          "hadoop-aws is named"),
        "connect-server": _fenced("sh", "\n".join([SPARK_HOME_LINE, TOKEN_LINE, connect_script(
            pools="$PWD/fairscheduler.xml")])),
        "fair-pools": _fenced("xml", FAIR_POOLS),
        "cluster": _fenced("sh", "\n".join([SPARK_HOME_LINE, loopback_exports(), master_script() + " &",
                                              worker_script() + " &"])),
    }


def write_pools(folder: Path) -> Path:
    """FAIR_POOLS as fairscheduler.xml in `folder` (where connect_script's `pools` points)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fairscheduler.xml"
    path.write_text(FAIR_POOLS)
    return path
