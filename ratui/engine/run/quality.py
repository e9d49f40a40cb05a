"""Quality tests: SQL that returns the violating rows, run against the run's branch, never main.

0 rows = passed. Rows found: `failed` for error severity (blocks the merge), `warned` for warn severity
(merges, run succeeds with warnings). A test whose SQL cannot run is `error` and blocks the merge when its
severity is error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from dataclasses import dataclass, field
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.project.discovery import QualityTest
from ratui.engine.project.templating import TemplateContext, line_mapper, render


@dataclass
class QualityOutcome:
    test: str
    severity: str
    status: str  # passed | failed | warned | error
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


def run_test(session, test: QualityTest, context: TemplateContext, sample_rows: int) -> QualityOutcome:
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
    except RatuiError as exc:
        return QualityOutcome(test.name, test.severity, "error", 0, _ms(began), sql, str(test.file),
                              error=str(exc), line=exc.line)
    except Exception as exc:
        from ratui.engine.spark.errors import error_line, error_message
        from ratui.engine.spark.session import is_cancellation

        if is_cancellation(exc):
            raise
        line = error_line(exc)
        if line is not None and sql:
            line = line_mapper(test.text, sql)(line)
        return QualityOutcome(test.name, test.severity, "error", 0, _ms(began), sql, str(test.file),
                              error=f"RAT-SQL-002 {error_message(exc)}", line=line)


def _ms(began: float) -> int:
    return int((time.monotonic() - began) * 1000)
