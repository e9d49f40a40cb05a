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

from .errors import RatuiError
from .project import QualityTest
from .templating import TemplateContext, render


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
                              error=str(exc))
    except Exception as exc:
        from .spark import is_cancellation

        if is_cancellation(exc):
            raise
        message = _spark_message(exc)
        return QualityOutcome(test.name, test.severity, "error", 0, _ms(began), sql, str(test.file),
                              error=f"RAT-SQL-002 {message}")


def _ms(began: float) -> int:
    return int((time.monotonic() - began) * 1000)


def _spark_message(exc: BaseException) -> str:
    """The first meaningful line of a Spark/Py4J error, without the JVM stack."""
    text = str(getattr(exc, "desc", None) or exc)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback")):
            return line[:500]
    return type(exc).__name__
