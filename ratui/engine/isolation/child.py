"""`python -I -m ratui.engine.isolation.child`: one isolated Python pipeline's `run(ctx)` (runner.py starts it).

Its plan arrives on stdin (JSON): the pipeline's file and text, the data server's URL, the inputs as plans the
data server reads (tables: their data and delete files; landing zones: Parquet copies in the run's folder), the
limits, the level. Then, in this order:

1. die with ratui (PR_SET_PDEATHSIG), lower the limits (CPU, memory, file size, open files, no core files);
2. confined/jail: Landlock, while the process has one thread (read the Python installation and the pipeline's
   folder, write the scratch folder, execute nothing, TCP only to the data server's port);
3. import what a pipeline needs (the Connect client, pyarrow, pandas: they may start threads), then confined/jail:
   the seccomp filter, on every thread;
4. connect to the data server (its gRPC threads start inside the domain), build ctx, load the user's module and
   call run(ctx);
5. have the data server write the DataFrame as Parquet into the run's result folder.

What it prints goes to stdout (the run's log); what happened goes to a pipe of its own as JSON lines: {"level":
...} once confined, then {"ok": ...} or {"error": {...}}. Nothing of ratui's own environment is here to leak: the
process started with an allow-listed environment (limits.child_environment).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ratui.engine.project.isolation_levels import BY_NAME, CONFINED
from ratui.engine.project.pipeline_context import PipelineContext

REPORT_FD = [-1]  # the pipe runner.py reads (its number is in the plan)


def report(message: dict[str, Any]) -> None:
    try:
        os.write(REPORT_FD[0], (json.dumps(message) + "\n").encode())
    except OSError:
        pass


class Context(PipelineContext):
    """`ctx` in a confined child (project/pipeline_context.py declares what each name does), over a Spark Connect
    session: its tables are scans of the files the data server reads, its zones the Parquet copies of the run."""

    def __init__(self, spark, plan: dict[str, Any]):
        from ratui.engine.iceberg.file_scan import FileEntry, scan_files
        from pyspark.sql.types import StructType

        self.spark = spark
        self._namespace = plan["namespace"]
        self._frames: dict[str, Any] = {}
        for key, table in plan["tables"].items():
            schema = StructType.fromJson(json.loads(table["schema"]))
            entries = [FileEntry.from_dict(e) for e in table["files"]]
            df = scan_files(spark, schema, entries, broadcast=table["broadcast"])
            df.createOrReplaceTempView(table["view"])
            self._frames[key] = df
        self._zones: dict[str, Any] = {}
        for zone, where in plan["zones"].items():
            df = spark.read.parquet(where["parquet"])
            df.createOrReplaceTempView(where["view"])
            self._zones[zone] = df
        self.run_started_at = plan["run_started_at"]
        self.watermark_value = plan["watermark_value"]
        self._incremental = bool(plan["incremental"])
        self._scd2 = bool(plan["scd2"])
        self._this = plan.get("this")

    def ref(self, name: str):
        parts = str(name).split(".")
        key = ".".join([self._namespace, *parts]) if len(parts) == 2 else str(name)
        if key not in self._frames:
            raise KeyError(f"ref('{name}') was not found in pipeline.py when ratui read it: ref() needs one literal "
                           "string argument")
        return self._frames[key]

    def landing_zone(self, zone: str):
        if zone not in self._zones:
            raise KeyError(f"landing_zone('{zone}') was not found in pipeline.py when ratui read it")
        return self._zones[zone]

    def sql(self, query: str):
        return self.spark.sql(query)

    @property
    def this(self):
        return self._frames.get(self._this) if self._this else None

    def is_incremental(self) -> bool:
        return self._incremental

    def is_scd2(self) -> bool:
        return self._scd2


def _user_line(tb, file: str) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def step(name: str) -> None:
    """When a step of the child ended (time.time()): the run's log says where its time went."""
    report({"step": name, "at": time.time()})


def _error(kind: str, message: str, line: int | None = None) -> None:
    report({"error": {"kind": kind, "message": message[:2000], "line": line}})


def main() -> int:
    """The steps of the module's docstring; the exit code is 3 when the process could not be confined (the user's
    code never ran), else 0 (what happened is on the report pipe)."""
    plan = json.loads(sys.stdin.read())
    REPORT_FD[0] = int(plan["report_fd"])
    scratch = _limited(plan)
    level = plan["level"]
    confined = level in CONFINED
    landlocked = _landlock(plan, scratch) if confined else None
    if confined and landlocked is None:
        return 3
    if not _client_imported():
        return 0
    step("imported")
    applied = _seccomp(level, landlocked) if confined else "process"
    if applied is None:
        return 3
    report({"level": applied})
    ran = _run_pipeline(plan)
    if ran is None:
        return 0
    spark, result_df = ran
    from pyspark.sql.connect.dataframe import DataFrame

    if not isinstance(result_df, DataFrame):
        _error("invalid", f"run(ctx) returned {type(result_df).__name__}, not a Spark DataFrame")
        return 0
    try:
        step("returned")
        result_df.write.mode("overwrite").parquet(plan["result"])
    except Exception as exc:  # noqa: BLE001 - Spark computing the user's DataFrame
        first = str(exc).splitlines()[0] if str(exc) else ""
        _error("spark", f"{type(exc).__name__}: {first}")
        return 0
    step("written")
    report({"ok": True})
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - the server's session ends with it anyway
        pass
    return 0


def _limited(plan: dict[str, Any]) -> Path:
    """Step 1: die with ratui, lower the limits, work in the scratch folder (returned)."""
    from ratui.engine.isolation import limits

    if plan["parent"] is not None:
        limits.die_with_parent(int(plan["parent"]))
    limits.Limits(**plan["limits"]).apply()
    scratch = Path(plan["scratch"])
    os.chdir(scratch)
    return scratch


def _landlock(plan: dict[str, Any], scratch: Path) -> Any:
    """Step 2: Landlock, while this process has one thread (it binds the calling thread and what it starts after);
    the imports after it read only what it allows. Its result, or None (reported) when it could not be applied."""
    from ratui.engine.isolation import landlock

    own = Path(f"/proc/{os.getpid()}")
    try:
        return landlock.restrict(read=[Path(p) for p in plan["read"]] + [own], write=[scratch, Path("/dev/null")],
                                 execute=[], connect_ports=[int(plan["port"])])
    except Exception as exc:  # never run the user's code less confined than decided
        _error("confine", f"could not confine the pipeline's process: {exc}")
        return None


def _client_imported() -> bool:
    """Step 3: import what a pipeline is expected to use (they may start threads: numpy's, pyarrow's); False
    (reported) in an installation without PySpark's Connect client."""
    try:
        import pyspark.sql.connect.session  # noqa: F401
        from pyspark.sql import SparkSession, functions, types, window  # noqa: F401
        from pyspark.sql.connect.dataframe import DataFrame  # noqa: F401
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as exc:  # an installation without PySpark's Connect client (pyspark[connect])
        _error("server", f"the Spark Connect client cannot be imported ({exc}): install ratui with its "
                         "dependencies (pip install ratui pulls pyspark[connect])")
        return False
    from ratui.engine.iceberg import file_scan  # noqa: F401
    import logging

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # PySpark's, which print JSON to stdout
        logging.getLogger(name).disabled = True
    return True


def _seccomp(level: str, landlocked: Any) -> str | None:
    """Step 3's end: the seccomp filter on every thread (TSYNC). What confines the process, as reported, or None
    (reported) when it could not be applied."""
    from ratui.engine.isolation import seccomp

    try:
        applied = f"{level}: {landlocked.describe()} + {seccomp.install()}"  # every thread (TSYNC)
        if BY_NAME[level].jailed:
            applied += " + bwrap"
        return applied
    except Exception as exc:
        _error("confine", f"could not confine the pipeline's process: {exc}")
        return None


def _run_pipeline(plan: dict[str, Any]) -> tuple[Any, Any] | None:
    """Step 4: connect to the data server, build ctx, load the user's module and call run(ctx): (the session, what
    run returned), or None when something failed (reported)."""
    from pyspark.sql import SparkSession

    file = plan["file"]
    try:
        code = compile(plan["text"], file, "exec")
    except SyntaxError as exc:
        _error("syntax", f"Python syntax error: {exc.msg}", exc.lineno)
        return None
    try:
        spark = SparkSession.builder.remote(plan["url"]).create()
        ctx = Context(spark, plan)
        step("connected")
    except Exception as exc:
        _error("server", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return None
    namespace: dict[str, Any] = {"__name__": "ratui_pipeline", "__file__": file}
    try:
        exec(code, namespace)  # noqa: S102 - the user's pipeline, in this confined process
        run = namespace.get("run")
        if not callable(run):
            _error("invalid", "pipeline.py defines no run(ctx) function")
            return None
        return spark, run(ctx)
    except MemoryError:
        _error("memory", "run(ctx) ran out of memory (python.memory_mb)")
        return None
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything, SystemExit included
        _user_error(exc, file)
        return None


def _user_error(exc: BaseException, file: str) -> None:
    """What run(ctx) raised, reported at the line of the user's own frame (a Spark error raised inside run(ctx) is
    the pipeline's, as in-process)."""
    line = _user_line(exc.__traceback__, file)
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        _error("memory", "run(ctx) could not start another thread: its memory (python.memory_mb) is spent", line)
        return
    if isinstance(exc, SystemExit):
        message = f"run(ctx) called sys.exit({exc.code!r})"
    else:
        first = str(exc).splitlines()[0] if str(exc) else ""
        message = f"{type(exc).__name__}: {first}".rstrip(": ")
    _error("user", message, line)
    if not type(exc).__module__.startswith("pyspark"):
        traceback.print_exc(file=sys.stdout)


def _end(code: int) -> None:
    """The child ends as soon as its report is out, whatever threads run(ctx) left running: a non-daemon thread
    would otherwise hold the interpreter's exit until python.timeout, and the run would be reported as one that
    ran too long though run(ctx) had returned."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing left to say
            pass
    os._exit(code)


if __name__ == "__main__":
    _end(main())
