"""Real Spark servers for the slow tests, started from pyspark's own distribution on 127.0.0.1.

    master = start_master(tmp)                        # a standalone Master
    worker = start_worker(master, tmp, cores=2)       # ... and a Worker registered with it
    connect = start_connect(tmp)                      # a Spark Connect server (local[2] inside)
    ...
    worker.stop(); master.stop(); connect.stop()      # the whole process group, always

Every server is started by the very script docs/team/spark.md gives a team (ratui/engine/spark/server_setup.py
renders both: the same settings, the same S3A jars and nothing more), with the test's own port and folders, run
through bash in the foreground (SPARK_NO_DAEMONIZE). It runs in a process group of its own (so stopping it takes its
executors and Python workers along), binds to the loopback address only, writes its log to a file of the test's
temporary folder, and must be ready within a deadline (its port accepts connections, the Master's JSON says the
Worker is alive), or the start fails with the log's tail. Ports are picked free. `disk=HiddenDisk` runs a server
where this machine's /tmp, projects and ratui's code do not exist (tests/hidden_disk.py), as on another machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from ratui.engine.spark import s3a, server_setup
from tests.hidden_disk import HiddenDisk

SPARK_HOME = Path(pyspark.__file__).resolve().parent
LOOPBACK = "127.0.0.1"
START_SECONDS = 90.0  # a cold JVM on a busy 2-core machine; a server is usually up in 6-20 s

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = LOOPBACK) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    log: Path
    url: str = ""
    bare_url: str = ""
    token: str = ""
    extra: dict = field(default_factory=dict)

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL to the whole process group at once: what a machine that dies does to it."""
        _signal_group(self.process, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to the process group, SIGKILL to whatever is left after `grace` seconds."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.process, signal.SIGKILL)  # children (executors, Python workers) too
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # start_new_session: the group's id is the leader's pid
    except (ProcessLookupError, PermissionError):
        pass


# The JVMs of the servers started here compile with Java's quick compiler only (as the test process's own do:
# tests/conftest.py quick_jit): the tests' data is tiny, and on 2 cores the optimising compiler was about half of
# each JVM's CPU. What the tests prove does not depend on which compiler ran the code.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def executor_jit(master: str | None) -> dict[str, str]:
    """The setting that gives a cluster's executors (started by a worker, for ratui's run) the quick compiler."""
    return {"spark.executor.extraJavaOptions": QUICK_JIT} if master and master.startswith("spark://") else {}


def spark_env(tmp: Path) -> dict[str, str]:
    """The environment of a server: pyspark's distribution, this interpreter for Python workers, loopback only, an
    empty configuration folder (no user's spark-defaults.conf), logs and scratch space in `tmp`."""
    conf_dir = tmp / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update({
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_PID_DIR": str(tmp / "pids"),  # sbin's scripts look for a pid file of a server already running
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONHASHSEED": "0",
        "SPARK_DAEMON_JAVA_OPTS": QUICK_JIT,  # a standalone master's and worker's own JVM
    })
    return env


def _launch(name: str, args: list[str], tmp: Path, env: dict[str, str] | None = None,
            disk: HiddenDisk | None = None) -> Server:
    """`disk`: the server runs inside that hidden disk's namespace (tests/hidden_disk.py), where `tmp` must be
    visible, and without this process's AWS settings: what it knows of a bucket, the client tells it."""
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"{name}.log"
    full_env = {**spark_env(tmp), **(env or {})}
    if disk is not None:
        if not disk.sees(tmp):
            raise RuntimeError(f"{tmp} is hidden from the servers of {disk.scratch}: use disk.folder()")
        args = disk.wrap(args)
        full_env = {k: v for k, v in full_env.items() if not k.startswith("AWS_")}
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=full_env, cwd=tmp, start_new_session=True)
    return Server(name, process, log)


def _wait(server: Server, ready, what: str, seconds: float = START_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"{server.name} exited ({server.process.returncode}) before {what}:\n"
                               f"{server.log_tail()}")
        try:
            if ready():
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.25)
    server.stop()
    raise RuntimeError(f"{server.name}: no {what} within {seconds:.0f} s:\n{server.log_tail()}")


def master_state(server: Server) -> dict:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{server.extra['webui']}/json/", timeout=2) as response:
        return json.load(response)


def _script(script: str) -> list[str]:
    """A script of server_setup.py, run as a reader's shell runs it."""
    return ["bash", "-c", script]


def start_master(tmp: Path, *, disk: HiddenDisk | None = None) -> Server:
    port, webui = free_port(), free_port()
    script = server_setup.master_script(spark_home=str(SPARK_HOME), port=port, webui_port=webui)
    server = _launch("master", _script(f"{server_setup.loopback_exports()}\nexec {script}"), tmp, disk=disk)
    server.url = f"spark://{LOOPBACK}:{port}"
    server.extra["webui"] = webui
    _wait(server, lambda: port_open(port) and master_state(server)["status"] == "ALIVE", "master listening")
    return server


def start_worker(master: Server, tmp: Path, *, cores: int, memory: str = "2g", name: str = "worker",
                 disk: HiddenDisk | None = None) -> Server:
    work_dir = tmp / f"{name}-work"
    work_dir.mkdir(parents=True, exist_ok=True)
    before = {w["id"] for w in master_state(master)["workers"] if w["state"] == "ALIVE"}
    script = server_setup.worker_script(master.url, spark_home=str(SPARK_HOME), cores=cores, memory=memory,
                                        webui_port=free_port(), work_dir=str(work_dir))
    server = _launch(name, _script(f"{server_setup.loopback_exports()}\nexec {script}"), tmp, disk=disk)
    server.extra["work_dir"] = work_dir

    def registered() -> bool:
        alive = [w for w in master_state(master)["workers"] if w["state"] == "ALIVE" and w["id"] not in before]
        if alive:
            server.extra["id"] = alive[0]["id"]
        return bool(alive)

    _wait(server, registered, "registration with the master")
    return server


def start_connect(tmp: Path, *, master: str = "local[2]", token: str | None = None,
                  disk: HiddenDisk | None = None, without: tuple[str, ...] = ()) -> Server:
    """pyspark's sbin/start-connect-server.sh as docs/team/spark.md tells a team to start it
    (server_setup.connect_script: loopback only, ratui's server settings, S3A's jars from the local Maven repository
    and nothing more), in the foreground, with a fresh token in the environment it reads: `server.url` is
    sc://localhost:PORT/;token=..., `server.bare_url` the same without the token. The test's own words: its master,
    2 GB of driver memory and the quick compiler. `disk`: inside that hidden disk; `without`: S3A's jars (artifact
    names) left out, for a test of a server set up with one missing."""
    import secrets

    port = free_port()
    token = token or secrets.token_urlsafe(24)
    pools = server_setup.write_pools(tmp)
    if not sorted((SPARK_HOME / "jars").glob("spark-connect_*.jar")):
        # the server's classes ship in pyspark's jars folder; older layouts kept them elsewhere
        raise RuntimeError(f"no spark-connect jar in {SPARK_HOME / 'jars'}")
    missing = [str(j.path(s3a.maven_repo())) for j in s3a.connector_jars() if not j.path(s3a.maven_repo()).is_file()]
    if missing:
        raise RuntimeError(f"S3A's jars are not in the local Maven repository (run .ci/run): {', '.join(missing)}")
    script = server_setup.connect_script(
        spark_home=str(SPARK_HOME), port=port, repo=str(s3a.maven_repo()), pools=str(pools), without=without,
        extra=["--master", master, "--driver-memory", "2g", "--conf", f"spark.driver.extraJavaOptions={QUICK_JIT}"])
    # the token through the environment the server reads (SPARK_CONNECT_AUTHENTICATE_TOKEN), not its command line
    server = _launch("connect", _script(script), tmp, env={server_setup.TOKEN_ENV: token}, disk=disk)
    # PySpark sends a token without TLS only to the name localhost (grpc's local credentials)
    server.bare_url = f"sc://localhost:{port}"
    server.url = f"{server.bare_url}/;token={token}"
    server.token = token
    _wait(server, lambda: port_open(port), "Spark Connect port")
    return server


# ------------------------------------------------------------------------------------------ ratui as a black box


def ratui(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m ratui ARGS` in a process of its own (this process already holds a local SparkSession)."""
    return subprocess.run([sys.executable, "-m", "ratui", *args], capture_output=True, text=True, timeout=timeout,
                          env=ratui_env(env), stdin=subprocess.DEVNULL)


def ratui_background(*args: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    # append mode: stdout (block-buffered into a file) and stderr share this file, and each write lands at its
    # end; in plain write mode a late flush of stdout wrote over what stderr had written meanwhile
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "ratui", *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=ratui_env(env), start_new_session=True)


def ratui_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(extra or {})
    return env


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


def query(project: Path, sql: str) -> list[dict]:
    out = ratui("query", "--project", str(project), "--format", "json", sql)
    assert out.returncode == 0, out.stdout + out.stderr
    return json_lines(out.stdout)


def with_spark(project: Path, *, master: str | None = None, remote: str | None = None,
               config: dict[str, str] | None = None, catalog: dict | None = None,
               landing: dict | None = None) -> Path:
    """Point a project's ratui.yaml at a master or a Connect server (the rest of it unchanged); `catalog`,
    `landing`: its catalog and landing sections too."""
    import yaml

    path = project / "ratui.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    spark = data.setdefault("spark", {})
    spark.pop("master", None)
    spark.pop("remote", None)
    if master:
        spark["master"] = master
    if remote:
        spark["remote"] = remote
    spark.setdefault("config", {}).update(executor_jit(master) | (config or {}))
    if catalog is not None:
        data["catalog"] = catalog
    if landing is not None:
        data["landing"] = landing
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return project


# ------------------------------------------------------------------------------------------ test projects

SLOW_PIPELINE = '''\
# @merge_strategy: full_refresh
# @isolation: none
# A Python UDF that sleeps on the executors: each task appends the executor's working folder to a marker file
# named after its partition and attempt, so a test sees where (and when) tasks ran; the last `gated` partitions'
# tasks then wait for the control folder's release file (a gate: the job cannot end before the test lets it). It
# reads and writes the test's control folder, outside the project: in ratui's own process (a confined pipeline
# could not; with a cluster or a Connect server the level is none anyway).
from pathlib import Path

CONTROL = Path(r"{control}")


def run(ctx):
    from pyspark.sql import functions as F

    version = int((CONTROL / "version").read_text())
    delay = float((CONTROL / "delay").read_text())
    parts = int((CONTROL / "parts").read_text())
    gated = int((CONTROL / "gated").read_text())
    markers = str(CONTROL / "markers")
    release = str(CONTROL / "release")

    @F.udf("long")
    def slow(x):
        import os
        import time
        from pyspark import TaskContext

        task = TaskContext.get()
        with open(os.path.join(markers, f"{{task.partitionId()}}-{{task.attemptNumber()}}"), "a") as fh:
            fh.write(os.getcwd() + "\\n")
        if task.partitionId() >= parts - gated:
            deadline = time.monotonic() + 600
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.05)
        time.sleep(delay)
        return x

    return ctx.spark.range(0, {rows}, 1, parts).select(slow("id").alias("id"), F.lit(version).alias("version"))
'''

FAST_PIPELINE = '''\
-- @merge_strategy: full_refresh
SELECT id, id * 2 AS doubled FROM range(0, 100)
'''


@dataclass
class SlowProject:
    root: Path
    control: Path

    @property
    def markers(self) -> Path:
        return self.control / "markers"

    def set(self, *, version: int, delay: float, parts: int | None = None, gated: int = 0) -> None:
        """The next run's rows carry `version`, each takes `delay` seconds, in `parts` tasks (unchanged if None: a
        quick first run in few tasks writes few files, which an object store makes worth it); the tasks of its last
        `gated` partitions wait until release() (so the run's job cannot end by itself: a cancel, a signal or a
        dead server is what ends it)."""
        (self.control / "version").write_text(str(version))
        (self.control / "delay").write_text(str(delay))
        (self.control / "gated").write_text(str(gated))
        (self.control / "release").unlink(missing_ok=True)
        if parts is not None:
            (self.control / "parts").write_text(str(parts))

    def release(self) -> None:
        """Let the gated tasks go on."""
        (self.control / "release").touch()

    def marker_lines(self) -> dict[str, list[str]]:
        """partition-attempt -> the working folder of the executor of each row it processed."""
        return {p.name: p.read_text().splitlines() for p in sorted(self.markers.iterdir())}


def make_slow_project(root: Path, *, rows: int, parts: int, master: str | None = None,
                      remote: str | None = None, control: Path | None = None,
                      catalog: dict | None = None, spark_settings: dict | None = None) -> SlowProject:
    """A project of two pipelines: bronze.slow (a sleeping Python UDF, its pace set by files in `control`) and
    bronze.fast (plain SQL). `control`: a folder the executors see (the test's instrumentation, not ratui's data;
    by default beside the project); `catalog`: ratui.yaml's catalog section (an s3:// warehouse, say);
    `spark_settings`: more keys of its spark section."""
    control = control or root.parent / f"{root.name}-control"
    (control / "markers").mkdir(parents=True)
    spark: dict = {"config": {"spark.sql.shuffle.partitions": 2, **executor_jit(master)}}
    if master:
        spark["master"] = master
    if remote:
        spark["remote"] = remote
    spark.update(spark_settings or {})
    import yaml

    files = {
        "ratui.yaml": yaml.safe_dump({"namespace": "demo", "spark": spark, **({"catalog": catalog} if catalog else {})},
                                     sort_keys=False),
        "demo/pipelines/bronze/slow/pipeline.py": SLOW_PIPELINE.format(control=control, rows=rows),
        "demo/pipelines/bronze/fast/pipeline.sql": FAST_PIPELINE,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    project = SlowProject(root, control)
    project.set(version=1, delay=0, parts=parts)
    return project


def running_run(project: Path, pipeline: str, deadline: float) -> str:
    """The id of `pipeline`'s running run, once it is recorded as running."""
    while time.monotonic() < deadline:
        out = ratui("runs", "--project", str(project), "--json", "--status", "running", "--pipeline", pipeline)
        runs = json_lines(out.stdout)
        if runs:
            return runs[0]["id"]
        time.sleep(0.5)
    raise AssertionError(f"no running run of {pipeline}")


def wait_for(condition, seconds: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


def main_head(project: Path) -> tuple[str, list[str]]:
    """main's head and the names of every other ref."""
    refs = json_lines(ratui("branches", "--project", str(project), "--json").stdout)
    head = next(r["head"] for r in refs if r["name"] == "main")
    return head, sorted(r["name"] for r in refs if r["name"] != "main")
