"""Python pipelines run in ratui's own process: `pipeline.py` defines `run(ctx)` returning a Spark DataFrame.

    # @merge_strategy: incremental
    # @unique_key: id
    def run(ctx):
        orders = ctx.ref("silver.clean_orders")       # a DataFrame read on the run's branch
        return orders.groupBy("customer_id").count()

`ctx` is project/pipeline_context.py's PipelineContext (ref(), landing_zone(), sql(), spark, this, run_started_at,
watermark_value, is_incremental(), is_scd2()); PythonContext gives it here. This is the `none` isolation level: the
code runs with the user's own privileges, as dbt's Python models do. The default level, `confined`, runs it in a
child process instead (isolation/: its own environment and limits, Landlock and seccomp, its data reached only
through a Spark Connect session), as do `process` and `jail`; isolation/levels.py decides which a run gets. Here a
cancel interrupts the code between bytecodes (RunControl.python_code). Dependencies are read statically from
ref()/landing_zone() calls with literal arguments, exactly as for SQL (project/python_source.py).
"""

from __future__ import annotations

import io
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ratui.engine.errors import RatuiError
from ratui.engine.project.pipeline_context import PipelineContext
from ratui.engine.run.control import PythonInterrupted


@dataclass
class PythonContext(PipelineContext):
    """`ctx` in ratui's own process: the run's session, its sources as views named by `_ref` and `_zone`."""

    spark: Any
    _ref: Callable[[str], str]
    _zone: Callable[[str], str]
    this_view: str | None
    run_started_at: str
    watermark_value: Any
    _incremental: bool
    _scd2: bool

    def ref(self, name: str):
        return self.spark.table(self._ref(name))

    def landing_zone(self, zone: str):
        return self.spark.table(self._zone(zone))

    def sql(self, query: str):
        return self.spark.sql(query)

    @property
    def this(self):
        return self.spark.table(self.this_view) if self.this_view else None

    def is_incremental(self) -> bool:
        return self._incremental

    def is_scd2(self) -> bool:
        return self._scd2


def run_python_pipeline(text: str, file: Path, ctx: PythonContext, on_print: Callable[[str], None] | None = None):
    """Run the user's `run(ctx)`. Whatever it raises (a SystemExit included) becomes RAT-PY-001 at the line of
    the user's own frame; what it prints goes to `on_print` (the run log), never to the terminal."""
    namespace: dict[str, Any] = {"__name__": "ratui_pipeline", "__file__": str(file)}
    try:
        code = compile(text, str(file), "exec")
    except SyntaxError as exc:
        raise RatuiError("RAT-PY-002", f"Python syntax error: {exc.msg}", file=str(file), line=exc.lineno) from None
    try:
        with captured_prints(on_print):
            exec(code, namespace)  # noqa: S102 - the user's own pipeline code, see the module docstring
            run = namespace.get("run")
            if not callable(run):
                raise RatuiError("RAT-PY-003", "pipeline.py defines no run(ctx) function", file=str(file))
            result = run(ctx)
    except (RatuiError, KeyboardInterrupt, PythonInterrupted):
        raise  # PythonInterrupted: a cancel (RunControl.python_code)
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything, SystemExit included
        from ratui.engine.spark.errors import error_message, is_cancellation

        if is_cancellation(exc):
            raise  # a cancel, not the pipeline's fault
        line = None
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(file):
                line = tb.tb_lineno
            tb = tb.tb_next
        if isinstance(exc, SystemExit):
            message = f"run(ctx) called sys.exit({exc.code!r})"
        elif type(exc).__module__.startswith(("pyspark", "py4j")):
            message = f"{type(exc).__name__}: {error_message(exc)}"
        else:
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
        raise RatuiError("RAT-PY-001", message[:500], file=str(file), line=line) from None
    from pyspark.sql import DataFrame

    if not isinstance(result, DataFrame):
        raise RatuiError("RAT-PY-003", f"run(ctx) returned {type(result).__name__}, not a Spark DataFrame",
                         file=str(file))
    return result


class _PrintRouter(io.TextIOBase):
    """sys.stdout while Python pipelines run: a pipeline thread's prints go to its sink, other threads' writes
    to the stream that was there before."""

    def __init__(self, original):
        self.original = original
        self.sinks: dict[int, Callable[[str], None]] = {}

    def write(self, text: str) -> int:
        sink = self.sinks.get(threading.get_ident())
        if sink is None:
            return self.original.write(text)
        for line in text.splitlines():
            if line.strip():
                sink(line)
        return len(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.sinks:
            self.original.flush()


_router_lock = threading.Lock()


@contextmanager
def captured_prints(sink: Callable[[str], None] | None) -> Iterator[None]:
    """Route this thread's writes to sys.stdout and sys.stderr into `sink` (dropped when None)."""
    me = threading.get_ident()
    with _router_lock:
        routers = []
        for name in ("stdout", "stderr"):
            current = getattr(sys, name)
            if not isinstance(current, _PrintRouter):
                current = _PrintRouter(current)
                setattr(sys, name, current)
            current.sinks[me] = sink or (lambda line: None)
            routers.append((name, current))
    try:
        yield
    finally:
        with _router_lock:
            for name, router in routers:
                router.sinks.pop(me, None)
                if not router.sinks and getattr(sys, name) is router:
                    setattr(sys, name, router.original)
