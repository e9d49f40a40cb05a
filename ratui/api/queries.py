"""SQL over the tables at a ref, lazily: nothing runs (and Spark does not start) until a result is asked for.

    q = p.sql("SELECT country, sum(amount) AS revenue FROM gold.daily_revenue GROUP BY country", ref="dev")
    q.to_arrow(); q.to_pandas(); q.to_polars(); q.spark()    # the last: a PySpark DataFrame, kept open

It is the engine's query path (the same as `ratui query` and the console's Query screen): table names rewritten to
the ref's tables, each read at the snapshot the ref pointed at when the query ran, and read-only: a statement that
would write or reach outside the project's tables is refused before Spark sees it (RAT-ACC-002).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ratui.api import html
from ratui.api.convert import to_pandas, to_polars
from ratui.api.tables import check_limit
from ratui.engine.errors import RatuiError

if TYPE_CHECKING:
    import pyarrow as pa

READ_ONLY_HINT = ("The Python API's SQL reads: one SELECT (or VALUES, DESCRIBE) over the project's tables at the "
                  "ref, without functions that reach outside them (reflect, java_method, read_files) or file paths "
                  "as tables. To change a table, write a pipeline and p.run() it (on a branch: p.branch(...)).")


class Query:
    """A query not run yet (see the module's docstring). Each conversion runs it again, at the ref's state then."""

    def __init__(self, project: Any, sql: str, ref: str):
        self.project = project
        self.sql = sql
        self.ref = ref
        self._open: list[Any] = []  # QueryResults kept for spark() DataFrames: closed with the project

    def _result(self):
        project = self.project
        project._check_open()
        try:
            result = project._engine.open_query(self.sql, ref=self.ref, read_only=True)
        except RatuiError as exc:
            raise _in_api_words(exc) from None
        return result

    def to_arrow(self, limit: int | None = None) -> "pa.Table":
        """The whole result (or its first `limit` rows) as an Arrow table, through Spark's own connection. When this
        process has not started Spark and the project's warm engine runs (or a console serves the shell), the
        engine's warm Spark answers instead (ratui/warm/api_served.py): same rows, same refusals."""
        limit = check_limit(limit)
        self.project._check_open()
        served = _from_engine(self.project._engine.root, self.sql, self.ref, limit)
        if served is not None:
            return served
        result = self._result()
        try:
            return result.to_arrow(limit)
        finally:
            result.close()

    def to_pandas(self, limit: int | None = None):
        return to_pandas(self.to_arrow(limit))

    def to_polars(self, limit: int | None = None):
        return to_polars(self.to_arrow(limit))

    def spark(self):
        """The result as a PySpark DataFrame (lazy, on this process's Spark session); it stays usable until the
        project is closed."""
        result = self._result()
        self.project._keep(result)
        return result.df

    @property
    def columns(self) -> list[str]:
        """The result's column names (Spark plans the query; no rows are read)."""
        result = self._result()
        try:
            return list(result.columns)
        finally:
            result.close()

    def _repr_html_(self) -> str:
        rows = self.to_arrow(limit=html.ROW_CAP + 1)
        return html.arrow(rows, caption=f"at {self.ref}: {self.sql}", total=None, cap=html.ROW_CAP)

    def __repr__(self) -> str:
        return f"<Query at {self.ref}: {self.sql!r} (lazy: to_arrow(), to_pandas(), to_polars(), spark())>"


def _in_api_words(exc: RatuiError) -> RatuiError:
    if exc.code == "RAT-ACC-002":  # the engine's words are a console's
        message = exc.message.replace("this console is read-only", "p.sql() only reads", 1)
        return RatuiError(exc.code, message, exc.file, exc.line, READ_ONLY_HINT)
    return exc


def _from_engine(root, sql: str, ref: str, limit: int | None) -> "pa.Table | None":
    """The rows from the project's running warm engine; None when this process's own Spark answers (it is started
    already, or no engine runs, or the engine has another environment)."""
    from ratui.api.engine_calls import answered

    def arrow(fd: int) -> "pa.Table":
        import pyarrow as pa

        with open(fd, "rb", closefd=False) as source:
            return pa.ipc.open_stream(source).read_all()

    try:
        return answered(root, {"api": "arrow", "sql": sql, "ref": ref, "limit": limit}, "rows", arrow)
    except RatuiError as exc:
        raise _in_api_words(exc) from None
