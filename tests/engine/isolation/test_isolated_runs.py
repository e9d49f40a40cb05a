"""Python pipelines run isolated (python.isolation), through the engine as a user runs them: a real run(ctx) in a
child process, a real data server (Spark Connect, confined by Landlock), real Iceberg tables.

The escapes a colleague's pipeline.py might try are tried here from a real run(ctx), each a test: the probe
pipeline attempts them all in one child (each attempt caught and recorded as a row of its table) and every test
asserts its own row and the side effect that did not happen. The kernel-level primitives have their own, faster
tests (test_confinement.py).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import psutil
import pytest

from ratui.engine.events import RunIsolated
from ratui.engine.facade.engine import Engine


PROBES = r'''# @merge_strategy: full_refresh
import ctypes
import io
import marshal
import os
import pickle
import socket
import sys
import threading

SECRET_FILE = {secret_file!r}
STATE_DB = {state_db!r}  # the project's own state database and settings: the pipeline's folder is readable, not these
SETTINGS = {settings!r}
BESIDE = {beside!r}
OUTSIDE = {outside!r}
OTHER_PORT = {other_port}
SKIP = {skip!r}  # what this level would let happen for real (a fork or exec of the child itself)


class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + OUTSIDE + "/pickle",))


def subclasses_walk():
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "catch_warnings":
            return cls()._module.__builtins__["__import__"]("os").system("touch " + OUTSIDE + "/walk")
    return "no catch_warnings"


def frame_walk():
    frame = sys._getframe()
    while frame.f_back is not None:
        frame = frame.f_back
    found = frame.f_globals["__builtins__"]
    importer = found["__import__"] if isinstance(found, dict) else found.__import__
    return importer("os").system("touch " + OUTSIDE + "/frame")


def ptrace_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, os.getppid(), 0, 0) == -1:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "attached"


def attempt(out, name, fn):
    if name in SKIP:
        return
    try:
        out.append((name, "open: " + repr(fn())[:300]))
    except BaseException as exc:  # noqa: BLE001
        out.append((name, "blocked: " + type(exc).__name__ + ": " + str(exc).splitlines()[0][:300]
                    if str(exc) else "blocked: " + type(exc).__name__))


def run(ctx):
    out = []
    spark = ctx.spark
    attempt(out, "read_aws_credentials", lambda: open(SECRET_FILE).read())
    attempt(out, "read_proc_1_environ", lambda: open("/proc/1/environ", "rb").read())
    attempt(out, "read_parent_environ", lambda: open(f"/proc/{{os.getppid()}}/environ", "rb").read())
    attempt(out, "read_beside_project", lambda: io.open(BESIDE).read())
    attempt(out, "read_etc_passwd", lambda: open("/etc/passwd").read())
    attempt(out, "read_state_db", lambda: open(STATE_DB, "rb").read(64))
    attempt(out, "read_ratui_yaml", lambda: open(SETTINGS).read())
    attempt(out, "pyarrow_fs_read", lambda: __import__("pyarrow.fs").fs.LocalFileSystem()
            .open_input_stream(BESIDE).read())
    attempt(out, "write_beside_project", lambda: open(OUTSIDE + "/written", "w").write("x"))
    attempt(out, "env_secret", lambda: os.environ["AWS_SECRET_ACCESS_KEY"])
    attempt(out, "os_system", lambda: os.system("touch " + OUTSIDE + "/system"))
    attempt(out, "subprocess", lambda: __import__("subprocess").run(["/usr/bin/touch", OUTSIDE + "/subprocess"]))
    attempt(out, "ctypes_system", lambda: ctypes.CDLL(None).system(("touch " + OUTSIDE + "/ctypes").encode()))
    attempt(out, "pickle_payload", lambda: pickle.loads(pickle.dumps(Payload())))
    attempt(out, "marshal_payload", lambda: exec(marshal.loads(marshal.dumps(compile(
        "import os; os.system('touch " + OUTSIDE + "/marshal')", "m", "exec")))))
    attempt(out, "subclasses_walk", subclasses_walk)
    attempt(out, "frame_walk", frame_walk)
    attempt(out, "fork", lambda: os.fork())
    attempt(out, "ptrace_parent", ptrace_parent)
    attempt(out, "signal_parent", lambda: os.kill(os.getppid(), 0))
    attempt(out, "connect_other_port", lambda: socket.create_connection(("127.0.0.1", OTHER_PORT), timeout=2))
    attempt(out, "udp_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    attempt(out, "ipv6_socket", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))
    attempt(out, "spark_context", lambda: spark.sparkContext)
    attempt(out, "py4j_gateway", lambda: __import__("py4j.java_gateway").java_gateway.JavaGateway()
            .jvm.java.lang.System.getenv())
    attempt(out, "spark_read_text", lambda: spark.read.text(BESIDE).collect())
    attempt(out, "sql_on_file", lambda: ctx.sql(f"SELECT * FROM text.`{{BESIDE}}`").collect())
    attempt(out, "sql_on_file_reenabled", lambda: (spark.conf.set("spark.sql.runSQLOnFiles", "true"),
                                                   ctx.sql(f"SELECT * FROM text.`{{BESIDE}}`").collect()))
    attempt(out, "sql_reflect", lambda: ctx.sql(
        "SELECT reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')").collect())
    attempt(out, "spark_write_outside", lambda: spark.range(1).selectExpr("'x' AS v").write.text(OUTSIDE + "/spark"))
    attempt(out, "exec", lambda: os.execv("/usr/bin/true", ["true"]))
    return spark.createDataFrame(out, "probe string, outcome string")
'''

# pipelines that exhaust what the child may have: each fails with a coded error, and the run ends
BOMBS = {
    "memory_bomb": ("# @merge_strategy: full_refresh\ndef run(ctx):\n    hoard = bytearray(4 * 1024 ** 3)\n"
                    "    return ctx.sql('SELECT 1 AS n')\n"),
    "thread_bomb": ("# @merge_strategy: full_refresh\nimport threading\n\n\ndef run(ctx):\n"
                    "    stop = threading.Event()\n    while True:\n"
                    "        threading.Thread(target=stop.wait, daemon=True).start()\n"),
}
SECRET = "probe-secret-do-not-leak-7f3a"

BLOCKED = ["read_aws_credentials", "read_proc_1_environ", "read_parent_environ", "read_beside_project",
           "read_etc_passwd", "read_state_db", "read_ratui_yaml", "pyarrow_fs_read", "write_beside_project",
           "env_secret", "subprocess", "fork",
           "ptrace_parent", "signal_parent", "connect_other_port", "udp_socket", "ipv6_socket", "spark_context",
           "py4j_gateway", "spark_read_text", "sql_on_file", "sql_on_file_reenabled", "sql_reflect",
           "spark_write_outside", "exec"]
# ways to run a command whose call returns a status instead of raising: the command must not have run
NO_EFFECT = {"os_system": "system", "ctypes_system": "ctypes", "pickle_payload": "pickle",
             "marshal_payload": "marshal", "subclasses_walk": "walk", "frame_walk": "frame"}

ISOLATION_YAML = """\
python:
  isolation: {level}
  memory_mb: 2048
  timeout: {timeout}
"""


def project_yaml(root: Path, level: str = "confined", timeout: int = 180, extra: str = "") -> None:
    text = (root / "ratui.yaml").read_text()
    (root / "ratui.yaml").write_text(text + ISOLATION_YAML.format(level=level, timeout=timeout) + extra)


def is_isolated_child(process: psutil.Process) -> bool:
    """An isolated child: an exec'd one (its command), or one forked from the fork server's template (the
    template's command, the template its parent)."""
    command = " ".join(process.cmdline())
    if "ratui.engine.isolation.child" in command:
        return True
    parent = process.parent()
    return "ratui.engine.isolation.fork_server" in command and parent is not None and \
        "ratui.engine.isolation.fork_server" in " ".join(parent.cmdline())


def children_running(of: psutil.Process | None = None) -> list[int]:
    """This process's (or `of`'s) isolated children still alive (a zombie is not: it ended and waits to be
    reaped)."""
    found = []
    for process in (of or psutil.Process()).children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and is_isolated_child(process):
                found.append(process.pid)
        except psutil.Error:
            pass
    return found


def rows(engine, sql: str) -> list[dict]:
    columns, found, _ = engine.query(sql)
    return [dict(zip(columns, r)) for r in found]


# each level's probe run: what it blocks; every other probe it runs, it lets through (README's table says both)
LEVEL_BLOCKS = {
    "confined": set(BLOCKED),
    "jail": set(BLOCKED),
    "process": {"env_secret", "spark_context", "py4j_gateway", "sql_on_file", "sql_reflect"},
}
# at `process` these would really fork, exec or write: not tried there (confined and jail try them)
PROCESS_SKIPS = {"fork", "exec", "os_system", "subprocess", "ctypes_system", "pickle_payload", "marshal_payload",
                 "subclasses_walk", "frame_walk", "ptrace_parent", "signal_parent", "write_beside_project",
                 "spark_write_outside", "sql_on_file_reenabled", "udp_socket", "ipv6_socket",
                 "read_proc_1_environ"}  # pid 1 may be unreadable to anyone in a container


@pytest.fixture(scope="module", params=["confined", "jail", "process"])
def probed(request, tmp_path_factory, spark):
    """The probe pipeline run once per level, with a secret in this process's environment, a credentials file and
    a file beside the project, and a loopback port listening that is not the data server's."""
    level = request.param
    base = tmp_path_factory.mktemp("probe")
    (base / "home" / ".aws").mkdir(parents=True)
    secret_file = base / "home" / ".aws" / "credentials"
    secret_file.write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    beside = base / "beside.txt"
    beside.write_text(f"beside the project: {SECRET}\n")
    outside = base / "outside"
    outside.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    root = base / "proj"
    (root / "demo/pipelines/bronze/probes").mkdir(parents=True)
    (root / "ratui.yaml").write_text("namespace: demo\nspark:\n  master: local[2]\n")
    project_yaml(root, level=level)
    (root / "demo/pipelines/bronze/probes/pipeline.py").write_text(PROBES.format(
        secret_file=str(secret_file), state_db=str(root / ".ratui" / "ratui.db"),
        settings=str(root / "ratui.yaml"), beside=str(beside), outside=str(outside),
        other_port=listener.getsockname()[1], skip=sorted(PROCESS_SKIPS) if level == "process" else []))
    for name, text in BOMBS.items():
        (root / f"demo/pipelines/bronze/{name}").mkdir(parents=True)
        (root / f"demo/pipelines/bronze/{name}/pipeline.py").write_text(text)
    old = os.environ.get("AWS_SECRET_ACCESS_KEY")
    os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET
    events = []
    try:
        engine = Engine.open(root)
        engine.subscribe(events.append)
        results = {r.pipeline.split(".")[-1]: r for r in engine.run(engine.compile().select([]))}
        result = results["probes"]
        assert result.status == "success", result.error
        found = {r["probe"]: r["outcome"] for r in rows(engine, "SELECT probe, outcome FROM bronze.probes")}
        run = engine.state.history.get_run(result.run_id)
        bombs = {name: (results[name].status, results[name].error) for name in BOMBS}
        engine.close()
    finally:
        listener.close()
        if old is None:
            os.environ.pop("AWS_SECRET_ACCESS_KEY", None)
        else:
            os.environ["AWS_SECRET_ACCESS_KEY"] = old
    return {"outcomes": found, "outside": outside, "run": run, "events": events, "root": root, "bombs": bombs,
            "level": level}


@pytest.mark.parametrize("probe", BLOCKED)
def test_an_escape_from_run_ctx_is_blocked_or_not_as_its_level_says(probed, probe):
    """Each escape tried from a real run(ctx): blocked where the level says it blocks it (README: Python pipelines,
    isolation), and at `process`, what that level does not block really goes through."""
    if probe not in probed["outcomes"]:
        assert probed["level"] == "process" and probe in PROCESS_SKIPS
        return
    outcome = probed["outcomes"][probe]
    if probe in LEVEL_BLOCKS[probed["level"]]:
        assert outcome.startswith("blocked:"), f"{probed['level']} {probe}: {outcome}"
        assert SECRET not in outcome
    else:
        assert outcome.startswith("open:"), f"{probed['level']} {probe}: {outcome}"


@pytest.mark.parametrize("probe", sorted(NO_EFFECT))
def test_a_command_run_from_run_ctx_never_runs(probed, probe):
    """os.system and its disguises (ctypes, pickle, marshal, a walk to __import__) cannot start a process when
    confined: the call returns a failure status and the file the command would have made is not there."""
    if probed["level"] == "process":
        assert probe not in probed["outcomes"]
        return
    outcome = probed["outcomes"][probe]
    assert not (probed["outside"] / NO_EFFECT[probe]).exists(), f"{probe} ran its command: {outcome}"
    assert SECRET not in outcome


def test_nothing_was_written_outside_and_the_level_is_recorded(probed):
    assert sorted(p.name for p in probed["outside"].iterdir()) == []
    run = probed["run"]
    want = {"confined": "confined: landlock-abi", "jail": "jail: landlock-abi", "process": "process"}
    assert run["isolation"].startswith(want[probed["level"]]), run["isolation"]
    assert ("seccomp" in run["isolation"]) == (probed["level"] != "process")
    assert [e.isolation for e in probed["events"] if isinstance(e, RunIsolated) and e.run_id == run["id"]] \
        == [run["isolation"]]
    logs = "\n".join(line["message"] for line in run["logs"])
    assert SECRET not in logs
    assert f"python isolation: {probed['level']}" in logs


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_bomb_ends_its_run_with_a_coded_error(probed, bomb):
    """4 GB asked of a 2 GB child, threads until none start: the run fails with RAT-ISO-003 (a resource limit), not
    a hang, at every level but none."""
    status, error = probed["bombs"][bomb]
    assert status == "failed" and error["code"] == "RAT-ISO-003", error


# ------------------------------------------------------------------------------------------ what still works

WORKS = r'''# @merge_strategy: full_refresh
import threading

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F


def run(ctx):
    seen = []
    threads = [threading.Thread(target=seen.append, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pq.write_table(pa.table({{"n": [1, 2, 3]}}), "scratch.parquet")
    total = int(pq.read_table("scratch.parquet").column("n").to_pandas().sum())
    frame = pd.DataFrame({{"g": ["x", "y", "x"], "v": [1, 2, 3]}}).groupby("g").v.sum().to_dict()
    print(f"threads {{len(seen)}} arrow {{total}} pandas {{frame}}")

    @F.udf("string")
    def udf_reads(path):
        try:
            return open(path).read()[:20]
        except OSError as exc:
            return "blocked " + type(exc).__name__

    orders = ctx.ref("bronze.orders")
    return (orders.groupBy("g").agg(F.sum("v").alias("v"))
            .withColumn("threads", F.lit(len(seen))).withColumn("arrow", F.lit(total))
            .withColumn("pandas_x", F.lit(frame["x"]))
            .withColumn("udf", udf_reads(F.lit({beside!r}))))
'''


def test_a_confined_pipeline_reads_refs_and_uses_threads_pyarrow_pandas_and_udfs(make_project, spark, tmp_path):
    beside = tmp_path / "beside.txt"
    beside.write_text(SECRET)
    root = make_project({
        "demo/pipelines/bronze/orders/pipeline.sql": "SELECT * FROM VALUES ('x', 1), ('y', 2), ('x', 5) AS t(g, v)\n",
        "demo/pipelines/silver/works/pipeline.py": WORKS.format(beside=str(beside)),
    })
    project_yaml(root)
    engine = Engine.open(root)
    results = engine.run(engine.compile().select([]))
    assert [r.status for r in results] == ["success", "success"], [r.error and r.error["message"] for r in results]
    got = rows(engine, "SELECT g, v, threads, arrow, pandas_x, udf FROM silver.works ORDER BY g")
    # the UDF runs in a Python worker of the data server, under its Landlock domain: the file is not readable
    assert got == [{"g": "x", "v": 6, "threads": 8, "arrow": 6, "pandas_x": 4, "udf": "blocked PermissionError"},
                   {"g": "y", "v": 2, "threads": 8, "arrow": 6, "pandas_x": 4, "udf": "blocked PermissionError"}]
    logs = [line["message"] for line in engine.state.history.get_run(results[1].run_id)["logs"]]
    assert "print: threads 8 arrow 6 pandas {'x': 4, 'y': 2}" in logs
    # the data server's JVM compiles as ratui's own JVM would here (spark/jit.py): quick, since the suite said its
    # work is small (tests/conftest.py quick_jit)
    from ratui.engine.isolation import data_server
    from ratui.engine.spark import jit

    assert jit.mode(engine.settings) == "quick"
    (server,) = data_server._servers
    assert "-XX:TieredStopAtLevel=1" in psutil.Process(server.process.pid).cmdline()
    engine.close()


STRATEGY_PIPELINES = {
    "full_refresh": "# @merge_strategy: full_refresh\n",
    "append_only": "# @merge_strategy: append_only\n",
    "incremental": "# @merge_strategy: incremental\n# @unique_key: id\n",
    "delete_insert": "# @merge_strategy: delete_insert\n# @unique_key: id\n",
    "scd2": "# @merge_strategy: scd2\n# @unique_key: id\n",
    "snapshot": "# @merge_strategy: snapshot\n# @partition_column: day\n",
}
STRATEGY_BODY = '''
def run(ctx):
    src = ctx.ref("bronze.src")
    if ctx.is_incremental() and ctx.this is not None:
        src = src.join(ctx.this.select("id"), "id", "left_anti").unionByName(
            src.join(ctx.this.select("id"), "id", "left_semi"))
    return src.select("id", "v", "day")
'''


def test_every_merge_strategy_from_an_isolated_python_pipeline(make_project, spark):
    files = {"demo/pipelines/bronze/src/pipeline.sql": (
        "SELECT * FROM VALUES (1, 'a', DATE'2026-01-01'), (2, 'b', DATE'2026-01-02') AS t(id, v, day)\n")}
    for name, header in STRATEGY_PIPELINES.items():
        files[f"demo/pipelines/silver/{name}/pipeline.py"] = header + STRATEGY_BODY
    root = make_project(files)
    project_yaml(root, level="process")
    engine = Engine.open(root)
    first = engine.run(engine.compile().select([]))
    assert all(r.status == "success" for r in first), [(r.pipeline, r.error) for r in first]
    (root / "demo/pipelines/bronze/src/pipeline.sql").write_text(
        "SELECT * FROM VALUES (2, 'B', DATE'2026-01-02'), (3, 'c', DATE'2026-01-03') AS t(id, v, day)\n")
    second = engine.run(engine.compile().select([]))
    assert all(r.status == "success" for r in second), [(r.pipeline, r.error) for r in second]
    assert {r["isolation"] for r in (engine.state.history.get_run(x.run_id) for x in second)
            if r["pipeline"].startswith("demo.silver")} == {"process"}
    expect = {
        "full_refresh": [(2, "B"), (3, "c")],
        "append_only": [(1, "a"), (2, "b"), (2, "B"), (3, "c")],
        "incremental": [(1, "a"), (2, "B"), (3, "c")],
        "delete_insert": [(1, "a"), (2, "B"), (3, "c")],
        "snapshot": [(1, "a"), (2, "B"), (3, "c")],
    }
    for name, want in expect.items():
        got = [(r["id"], r["v"]) for r in rows(engine, f"SELECT id, v FROM silver.{name} ORDER BY id, v")]
        assert got == sorted(want), name
    current = rows(engine, "SELECT id, v FROM silver.scd2 WHERE valid_to IS NULL ORDER BY id")
    assert [(r["id"], r["v"]) for r in current] == [(1, "a"), (2, "B"), (3, "c")]
    engine.close()


# ------------------------------------------------------------------------------------------ limits and ends

def test_a_wall_clock_timeout_kills_the_child_and_everything_it_started(make_project, spark):
    root = make_project({"demo/pipelines/bronze/sleepy/pipeline.py": (
        "# @merge_strategy: full_refresh\nimport time\n\n\ndef run(ctx):\n    time.sleep(600)\n")})
    project_yaml(root, level="confined", timeout=3)
    engine = Engine.open(root)
    before = engine.state.catalog.table_pointers("main")
    left = root / ".ratui/isolation/runs/261101000000dead00/scratch"  # a killed process's run folder
    left.mkdir(parents=True)
    (left / "stolen.txt").write_text("left behind")
    began = time.monotonic()
    (result,) = engine.run(engine.compile().select([]))
    assert result.status == "failed" and result.error["code"] == "RAT-ISO-002", result.error
    assert time.monotonic() - began < 120
    assert engine.state.catalog.table_pointers("main") == before
    assert list((root / ".ratui/isolation/runs").iterdir()) == []  # its own folder and the one left behind
    assert children_running() == []
    engine.close()


def test_a_cancel_ends_the_child_at_once(make_project, spark):
    import threading

    from ratui.engine.events import LogLine

    root = make_project({"demo/pipelines/bronze/stuck/pipeline.py": (
        "# @merge_strategy: full_refresh\ndef run(ctx):\n    print('spinning', flush=True)\n    while True:\n"
        "        pass\n")})
    project_yaml(root)
    engine = Engine.open(root)
    spinning = threading.Event()  # the child's print reaches the run's log: it is inside run(ctx), never to leave
    engine.subscribe(lambda e: spinning.set() if isinstance(e, LogLine) and e.message == "print: spinning" else None)
    invocation = engine.start(engine.compile().select([]), trigger="cli")
    assert spinning.wait(180)
    assert children_running() != []
    assert engine.cancel(invocation.run_ids[0]) == "requested"
    # the child never ends by itself: a run that ends, cancelled, with no child left, was ended by the cancel (the
    # child is killed and reaped before the run's cleanup, however long that takes on a loaded machine)
    assert invocation.wait(180)
    (result,) = invocation.results
    assert result.status == "cancelled", result.error
    assert children_running() == []
    engine.close()


JAILED = r'''# @merge_strategy: full_refresh
# @isolation: jail
import os


def run(ctx):
    # Landlock lets a confined process stat any path; in the jail, what is not bound is not there at all
    seen = {{"pid": os.getpid(), "project": os.path.exists({project!r}), "tmp_marker": os.path.exists({marker!r}),
            "home": os.path.exists({home!r})}}
    return ctx.spark.createDataFrame([(repr(seen),)], "seen string")
'''


def test_jail_runs_the_child_inside_bubblewrap(make_project, spark, tmp_path):
    """jail: the child in its own PID namespace (a small pid), the machine's /tmp, the home folder and the project
    (but for the pipeline's own folder) not there at all, where confined would see them exist; the level says
    bwrap. CI installs bubblewrap (.ci/run)."""
    import ast
    import tempfile

    root = make_project({})
    (root / "demo/pipelines/bronze/jailed").mkdir(parents=True)
    with tempfile.NamedTemporaryFile(prefix="ratui-jail-marker-", dir="/tmp") as marker, \
            tempfile.NamedTemporaryFile(prefix=".ratui-jail-marker-", dir=Path.home()) as in_home:
        (root / "demo/pipelines/bronze/jailed/pipeline.py").write_text(JAILED.format(
            project=str(root / "ratui.yaml"), marker=marker.name, home=in_home.name))
        project_yaml(root, extra="  isolation_required: true\n")
        engine = Engine.open(root)
        (result,) = engine.run(engine.compile().select([]))
        assert result.status == "success", result.error
        assert engine.state.history.get_run(result.run_id)["isolation"] == "jail: landlock-abi7 + seccomp + bwrap"
        seen = ast.literal_eval(rows(engine, "SELECT seen FROM bronze.jailed")[0]["seen"])
        assert seen == {"pid": seen["pid"], "project": False, "tmp_marker": False, "home": False}, seen
        assert seen["pid"] < 10  # its own PID namespace
        engine.close()


def test_a_level_the_machine_cannot_give_is_refused_when_required(monkeypatch):
    """Without bwrap, jail degrades to confined and says why; python.isolation_required turns that into
    RAT-ISO-001 before anything runs."""
    from ratui.engine.errors import RatuiError
    from ratui.engine.isolation import levels

    monkeypatch.setattr(levels, "bwrap", lambda: None)  # a machine without bubblewrap
    got = levels.decide("jail", spark_is_local=True, tables_on_disk=True, required=False)
    assert (got.level, got.reason) == ("confined", "bwrap is not installed (Debian's bubblewrap package)")
    with pytest.raises(RatuiError) as refused:
        levels.decide("jail", spark_is_local=True, tables_on_disk=True, required=True, file="p.py")
    assert refused.value.code == "RAT-ISO-001" and "bwrap" in refused.value.message
    remote = levels.decide("confined", spark_is_local=False, tables_on_disk=True, required=False)
    assert remote.level == "none" and "not on this machine" in (remote.reason or "")


def test_a_pipeline_can_ask_for_none_and_runs_in_process(make_project, spark):
    root = make_project({"demo/pipelines/bronze/p/pipeline.py": (
        "# @merge_strategy: full_refresh\n# @isolation: none\ndef run(ctx):\n"
        "    return ctx.spark.createDataFrame([(ctx.spark.sparkContext.defaultParallelism,)], 'n int')\n")})
    project_yaml(root)
    engine = Engine.open(root)
    (result,) = engine.run(engine.compile().select([]))
    assert result.status == "success", result.error
    assert engine.state.history.get_run(result.run_id)["isolation"] == "none"
    engine.close()


def test_the_samples_python_pipeline_gives_the_same_rows_confined_as_in_process(local_sample):
    """gold.country_summary ran confined (the default) in the sample's forced run, and gives the rows (count and
    checksum of every column) it gives when run in ratui's own process."""
    assert local_sample["python"] == ["ecommerce.gold.country_summary"]
    assert local_sample["isolation"]["ecommerce.gold.country_summary"].startswith("confined: landlock-abi")
    key = "ecommerce.gold.country_summary"
    assert local_sample["in_process"][key] == local_sample["forced"][key]
    assert local_sample["forced"][key][0] > 0


def test_a_sql_pipeline_that_reaches_for_java_is_refused_at_its_line(make_project, spark):
    root = make_project({"demo/pipelines/bronze/p/pipeline.sql": (
        "-- @merge_strategy: full_refresh\nSELECT 1 AS id,\n  reflect('java.lang.System', 'getenv', 'HOME') AS h\n")})
    engine = Engine.open(root)
    (result,) = engine.run(engine.compile().select([]))
    assert result.status == "failed" and result.error["code"] == "RAT-ISO-006", result.error
    assert result.error["line"] == 3
    assert engine.state.catalog.table_pointers("main") == {}
    engine.close()


def test_a_killed_ratui_leaves_no_child_and_no_data_server(make_project, tmp_path):
    """`ratui run` SIGKILLed while a confined pipeline runs (no atexit, no signal handler): the child and the data
    server's JVM die with it (the parent-death signal), within seconds, and the run is dead at the next read."""
    import signal

    from tests.servers import json_lines, ratui, ratui_background, wait_for

    root = make_project({"demo/pipelines/bronze/sleepy/pipeline.py": (
        "# @merge_strategy: full_refresh\nimport time\n\n\ndef run(ctx):\n    print('asleep', flush=True)\n"
        "    time.sleep(600)\n")})
    project_yaml(root)

    def ours() -> list[str]:
        found = []
        for process in psutil.process_iter():
            try:
                if process.pid != os.getpid() and (str(root) in " ".join(process.cmdline())
                                                   or str(root) in process.cwd()):
                    found.append(" ".join(process.cmdline()))
            except psutil.Error:
                pass
        return found

    proc = ratui_background("run", "--project", str(root), log=tmp_path / "run.log")
    try:
        wait_for(lambda: children_running(psutil.Process(proc.pid)) != [], 180, "the isolated child")
        assert any("SparkConnectServer" in c for c in ours())  # the data server runs
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        wait_for(lambda: ours() == [], 30, "no process of the killed ratui's")
    finally:
        if proc.poll() is None:
            proc.kill()
    (run,) = json_lines(ratui("runs", "--project", str(root), "--json").stdout)
    assert run["status"] == "failed" and run["error_code"] == "RAT-RUN-006", run  # its process is dead
