"""Quality tests: SQL that returns the violating rows, run against the run's branch, never main.

0 rows = passed. Rows found: `failed` for error severity (blocks the merge), `warned` for warn severity
(merges, run succeeds with warnings). A test whose SQL cannot run is `error` and blocks the merge when its
severity is error. A test Spark could not run at all (Spark gone, a class missing on its side, the object store from
there) is `not_run`: no finding about the data, and the tests stop there (TestsNotRun carries Spark's coded error,
which is the run's).

Cost: a run's tests are rendered and analysed one by one (an error is the test's own), then every analysable test's
violations are counted in one Spark job; only a test that found rows runs again, for its sample. When the shared job
fails at execution (an ANSI error in one test's SQL), each test runs alone, so the failure is pinned on its test.
Each test of the shared job is credited its analysis time plus an equal share of the job.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Callable

from ratui.engine.errors import RatuiError
from ratui.engine.failpoints import failpoint
from ratui.engine.project.discovery import QualityTest
from ratui.engine.project.templating import TemplateContext, line_mapper, render
from ratui.engine.spark.errors import error_line, error_message, is_cancellation, spark_side_failure
from ratui.engine.vocabulary import QUALITY_NOT_RUN


@dataclass
class QualityOutcome:
    test: str
    severity: str
    status: str  # passed | failed | warned | error | not_run
    violations: int
    duration_ms: int
    sql: str
    file: str
    columns: list[str] = field(default_factory=list)
    sample: list[list[Any]] = field(default_factory=list)
    error: str | None = None
    line: int | None = None  # where in the test file the error is, when Spark says

    @property
    def blocks_merge(self) -> bool:
        return self.severity == "error" and self.status in ("failed", "error")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


class TestsNotRun(Exception):
    """Spark could not run the tests: `error` says why (Spark's coded error), `outcomes` are every test's, in order,
    those it could not run `not_run`."""

    def __init__(self, error: RatuiError, outcomes: list[QualityOutcome]):
        super().__init__(error.message)
        self.error = error
        self.outcomes = outcomes


def run_tests(session, tests: list[QualityTest], context: TemplateContext, sample_rows: int,
              check: Callable[[], None] = lambda: None) -> list[QualityOutcome]:
    """Every test of a run, in order (see the module's docstring). `check` raises to stop (cancellation);
    TestsNotRun when Spark itself could not run them."""
    outcomes: dict[int, QualityOutcome] = {}
    try:
        _run_tests(session, tests, context, sample_rows, check, outcomes)
    except Exception as exc:
        error = None if isinstance(exc, RatuiError) or is_cancellation(exc) else spark_side_failure(exc)
        if error is None:
            raise
        done = [outcomes.get(i) for i in range(len(tests))]
        raise TestsNotRun(error, not_run(tests, error, done)) from exc
    return [outcomes[i] for i in range(len(tests))]


def not_run(tests: list[QualityTest], error: RatuiError,
            done: list[QualityOutcome | None] | None = None) -> list[QualityOutcome]:
    """Every test's outcome when Spark could not run them (`error`): those `done` before as they came, the others
    `not_run` with Spark's error."""
    done = done or [None] * len(tests)
    return [outcome or QualityOutcome(test.name, test.severity, QUALITY_NOT_RUN, 0, 0, "", str(test.file),
                                      error=f"{error.code} {error.message}")
            for test, outcome in zip(tests, done)]


def _run_tests(session, tests: list[QualityTest], context: TemplateContext, sample_rows: int,
               check: Callable[[], None], outcomes: dict[int, QualityOutcome]) -> None:
    prepared: list[tuple[int, QualityTest, str, Any, int]] = []  # index, test, sql, DataFrame, analysis ms
    for i, test in enumerate(tests):
        check()
        began = time.monotonic()
        sql = ""
        failpoint(f"kill:test:{test.name}")
        try:
            sql = render(test.text, test.file, context)
            prepared.append((i, test, sql, session.sql(sql), _ms(began)))
        except Exception as exc:
            outcomes[i] = _failed(test, sql, exc, began)
    counts: dict[int, int] | None = {}
    shared = 0
    if prepared:
        check()
        began = time.monotonic()
        # one row per violating row, tagged with its test, counted by one grouping: a single shuffle for all
        # the tests (a count per test would be a shuffle, and a Spark job, each)
        per_test = [df.selectExpr(f"{i} AS t") for i, _test, _sql, df, _ms_ in prepared]  # text: few JVM calls
        try:
            union = reduce(lambda a, b: a.unionAll(b), per_test)
            counts = {row.t: row["count"] for row in union.groupBy("t").count().collect()}
        except Exception as exc:
            if is_cancellation(exc) or spark_side_failure(exc) is not None:  # stopped, or Spark's own trouble
                raise
            counts = None
        shared = _ms(began) // len(prepared)
    for i, test, sql, df, analysis in prepared:
        if counts is None:
            check()
            outcomes[i] = run_test(session, test, context, sample_rows)
            continue
        began = time.monotonic()
        violations = counts.get(i, 0)
        try:
            sample = [[_jsonable(v) for v in row] for row in df.limit(sample_rows).collect()] if violations else []
        except Exception as exc:
            outcomes[i] = _failed(test, sql, exc, began)
            continue
        status = "passed" if violations == 0 else ("failed" if test.severity == "error" else "warned")
        outcomes[i] = QualityOutcome(test.name, test.severity, status, violations, analysis + shared + _ms(began),
                                     sql, str(test.file), list(df.columns), sample)


def _failed(test: QualityTest, sql: str, exc: Exception, began: float) -> QualityOutcome:
    """A test whose SQL could not run: `error`, with the line in the test's file when Spark names one. Spark that
    could not run it (stopped, gone, lacking a class) is raised: that is no fault of the test's."""
    if isinstance(exc, RatuiError):
        return QualityOutcome(test.name, test.severity, "error", 0, _ms(began), sql, str(test.file),
                              error=str(exc), line=exc.line)
    if is_cancellation(exc) or spark_side_failure(exc) is not None:
        raise exc
    line = error_line(exc)
    if line is not None and sql:
        line = line_mapper(test.text, sql)(line)
    return QualityOutcome(test.name, test.severity, "error", 0, _ms(began), sql, str(test.file),
                          error=f"RAT-SQL-002 {error_message(exc)}", line=line)


def run_test(session, test: QualityTest, context: TemplateContext, sample_rows: int) -> QualityOutcome:
    """One test alone: its own count job (and a sample job when it found rows)."""
    began = time.monotonic()
    sql = ""
    try:
        sql = render(test.text, test.file, context)
        df = session.sql(sql)
        violations = df.count()
        columns = list(df.columns)
        sample = [[_jsonable(v) for v in row] for row in df.limit(sample_rows).collect()] if violations else []
        status = "passed" if violations == 0 else ("failed" if test.severity == "error" else "warned")
        return QualityOutcome(test.name, test.severity, status, violations, _ms(began), sql, str(test.file),
                              columns, sample)
    except Exception as exc:
        return _failed(test, sql, exc, began)


def _ms(began: float) -> int:
    return int((time.monotonic() - began) * 1000)
