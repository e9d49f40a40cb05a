"""How what went wrong in a run becomes its status and coded error: a cancel, Spark gone, the object store, a class
missing from Spark's classpath (a server's setup), the pipeline's own query (at the line of its file Spark names),
or a bug (RAT-RUN-002, with the traceback in the log).
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ratui.engine.errors import RatuiError
from ratui.engine.project.templating import line_mapper
from ratui.engine.run.control import Cancelled, RunControl
from ratui.engine.spark import errors as spark_errors

if TYPE_CHECKING:
    from ratui.engine.project.discovery import Pipeline
    from ratui.engine.run.scope import RunScope
    from ratui.engine.state.catalog.base import BranchCatalog


def ended_by(exc: BaseException, scope: RunScope) -> tuple[str, RatuiError]:
    """(status, error) of a run that raised `exc` (inside the `except` that caught it: a bug's traceback is
    logged)."""
    control = scope.control
    if isinstance(exc, RatuiError):
        return "failed", spark_errors.at_class_setting(exc, scope.settings)
    if isinstance(exc, Cancelled) or (control.cancel_requested.is_set() and spark_errors.is_cancellation(exc)):
        return ("failed" if control.cancel_error else "cancelled",
                control.cancel_error or RatuiError("RAT-RUN-001", f"run {scope.run_id} of {scope.key} was cancelled"))
    if spark_errors.is_unreachable(exc):
        return "failed", RatuiError(spark_errors.UNREACHABLE_CODE, spark_errors.error_message(exc))
    # Spark's side (the store from there, a class missing on a server), or this process's own store: never a bug
    stored = spark_errors.spark_side_failure(exc) or storage_error(scope.catalog, exc)
    scope.log.line(traceback.format_exc(), "error")
    if stored is not None:
        return "failed", spark_errors.at_class_setting(stored, scope.settings)
    return "failed", RatuiError("RAT-RUN-002", f"{type(exc).__name__}: {first_line(exc)}")


def storage_error(catalog: BranchCatalog, exc: BaseException) -> RatuiError | None:
    """A failure of this process's own reads and writes of an s3:// warehouse (PyIceberg's metadata through
    pyarrow, boto3), as RAT-S3-00x; None when the tables are local or it is something else."""
    storage = catalog.storage
    if storage.s3 is None or not isinstance(exc, OSError) and type(exc).__module__.split(".")[0] not in (
            "botocore", "boto3", "pyarrow"):
        return None
    return storage.s3.error(exc, "read or write the warehouse's tables", storage.url)


def query_error(exc: BaseException, control: RunControl, pipeline: Pipeline, sql: str) -> BaseException:
    """A failure while Spark executes the pipeline's query, as the pipeline's coded error."""
    if isinstance(exc, (RatuiError, Cancelled)):
        return exc
    if control.cancel_requested.is_set() and spark_errors.is_cancellation(exc):
        return Cancelled()
    # Spark went away (a Connect server gone), the object store from Spark's side, a class missing from Spark's
    # classpath: not the pipeline's fault
    stored = spark_errors.spark_side_failure(exc)
    if stored is not None:
        return stored
    file, _config = pipeline.loaded()
    if pipeline.kind == "sql":
        return spark_error(exc, "RAT-SQL-001", file, pipeline.text, sql)
    return spark_error(exc, "RAT-PY-004", file)


def spark_error(exc: BaseException, code: str, file: Path, template: str | None = None,
                sql: str | None = None) -> RatuiError:
    """A Spark failure as a coded error at the template line it comes from (when Spark names a line)."""
    if isinstance(exc, RatuiError):
        return exc
    line = spark_errors.error_line(exc)
    if line is not None and template is not None and sql is not None:
        line = line_mapper(template, sql)(line)
    elif template is None:
        line = None  # a line of SQL built in Python code, not of the file
    return RatuiError(code, spark_errors.error_message(exc), file=str(file), line=line)


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return type(exc).__name__
