"""Ad-hoc SQL over the tables at a ref: `silver.clean_orders` or `ecommerce.silver.clean_orders`.

Spark's temp views cannot carry dotted names, so each table the query names becomes a view and the query's table
names are rewritten to those views (outside string literals and quoted identifiers).

A `QueryResult` keeps the query on Spark: the first page is fetched at once (`LIMIT`), further pages with
`OFFSET ... LIMIT`, the row count in a job of its own when asked for, and an export writes the whole result from
Spark to a file. No more than one page of rows ever reaches Python, whatever the result's size. Each table is read
at the snapshot the ref pointed to when the query was opened, so the pages of one result agree with each other.
Its Spark jobs carry the query's id (a job group, or a tag on Spark Connect): `cancel(query_id)` interrupts them.
"""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.read import read_table
from ratui.engine.project.names import sql_ident
from ratui.engine.run.read_only_sql import check_read_only
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.spark import session as spark_mod
from ratui.engine.spark.s3a import spark_is_local
from ratui.engine.spark.errors import (UNREACHABLE_CODE, error_message, error_position, is_cancellation,
                                       is_unreachable, storage_failure)
from ratui.engine.state.project_state import ProjectState
from ratui.engine.vocabulary import MAIN


EXPORT_FORMATS = ("csv", "parquet")
EXPORT_FOLDER = ".ratui/exports"


def rewrite(sql: str, tables: dict[str, str], default_namespace: str) -> tuple[str, set[str]]:
    """Replace the query's table names with view names; returns the SQL and the table keys it uses.

    The names come from sqlglot's parse (Spark's dialect): only a table reference is replaced, never a word of a
    comment, a string or a column, and the rest of the text stays exactly as typed (Spark's line and column in an
    error still point at the user's own text). SQL sqlglot cannot parse is rewritten from its tokens instead (a
    name in a comment or a string is no token, so it stays too)."""
    spans: list[tuple[int, int, str]] = []  # (start, end inclusive, view), in the text
    used: set[str] = set()

    def note(parts: list[tuple[str, int, int]]) -> None:
        name = ".".join(p[0] for p in parts)
        key = name if len(parts) == 3 else f"{default_namespace}.{name}"
        if len(parts) in (2, 3) and key in tables:
            used.add(key)
            spans.append((parts[0][1], parts[-1][2], tables[key]))

    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
        for tree in trees:
            for table in tree.find_all(exp.Table):
                idents = [p for p in table.parts if isinstance(p, exp.Identifier)]
                if len(idents) == len(table.parts) and all("start" in (i.meta or {}) for i in idents):
                    note([(i.name, i.meta["start"], i.meta["end"]) for i in idents])
    except sqlglot.errors.SqlglotError:
        spans.clear()
        used.clear()
        _token_names(sql, note)
    text = sql
    for start, end, view in sorted(spans, reverse=True):
        text = text[:start] + view + text[end + 1:]
    return text, used


def _token_names(sql: str, note) -> None:
    """Dotted names of two or three identifier tokens (a, ., b[, ., c]): the fallback for SQL sqlglot cannot
    parse."""
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.tokenize(sql, read="spark")
    except sqlglot.errors.SqlglotError:
        return
    names = (TokenType.VAR, TokenType.IDENTIFIER)
    i = 0
    while i < len(tokens):
        parts: list[tuple[str, int, int]] = []
        j = i
        while j < len(tokens) and tokens[j].token_type in names and len(parts) < 3:
            parts.append((tokens[j].text, tokens[j].start, tokens[j].end))
            if j + 1 < len(tokens) and tokens[j + 1].token_type == TokenType.DOT:
                j += 2
            else:
                j += 1
                break
        if len(parts) >= 2:
            note(parts)
            i = j
        else:
            i += 1


def query_error(exc: BaseException, ref: str, keys) -> RatuiError:
    """A failed query as RAT-SQL-004, with the line Spark names and the tables there are at the ref."""
    if isinstance(exc, RatuiError):
        return exc
    text = str(getattr(exc, "desc", None) or exc).strip()
    first = error_message(exc) if text else type(exc).__name__
    line, column = error_position(text)
    where = f" (line {line}, column {column + 1})" if line is not None and column is not None else ""
    tables = ", ".join(sorted(k.split(".", 1)[1] for k in keys)) or "none yet"
    hint = f"Fix the query. Tables at {ref}: {tables}."
    if "FAILED_READ_FILE" in text or "not a Parquet file" in text:
        hint = ("A data file of a table cannot be read: it was damaged, cut short or replaced outside ratui. Roll "
                "the table back to a commit before the file (`ratui log TABLE`, `ratui rollback TABLE --to ...`) or "
                "rebuild it with `ratui run NAME --full-refresh`; Spark's whole report is in .ratui/logs/spark.log.")
    return RatuiError("RAT-SQL-004", f"query failed{where}: {first}", line=line, hint=hint,
                      details={"column": column})


class QueryResult:
    """One query's result, kept on Spark (see the module's docstring). Close it when done."""

    def __init__(self, state: ProjectState, session, sql: str, *, ref: str = MAIN,
                 query_id: str | None = None, read_only: bool = False) -> None:
        self.state = state
        self.session = session
        self.sql = sql
        self.ref = ref
        self.query_id = query_id or f"query-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._count: int | None = None
        catalog = state.catalog
        catalog.get_ref(ref)  # RAT-CAT-002 for an unknown ref
        self.keys = sorted(catalog.table_pointers(ref))
        if read_only:  # before Spark sees it: a statement that writes is refused, not run
            check_read_only(sql, set(self.keys), state.settings.namespace)
        views = {key: sql_ident(*key.split(".")) for key in self.keys}
        text, used = rewrite(sql, views, state.settings.namespace)
        self.tables = sorted(used)
        self._bind()
        try:
            for key in used:
                read_table(session, catalog.load_table(ref, key)).createOrReplaceTempView(views[key].strip("`"))
            self.df = session.sql(text)
            self.columns = list(self.df.columns)
            self.types = [f.dataType.simpleString() for f in self.df.schema.fields]
        except Exception as exc:
            raise self._error(exc) from None

    # ------------------------------------------------------------------------------------------ pages

    def page(self, offset: int, size: int) -> tuple[list[list[Any]], bool]:
        """Rows offset .. offset+size-1 and whether more follow (one row more is fetched to know)."""
        self._bind()
        try:
            frame = self.df.offset(offset) if offset else self.df
            rows = frame.limit(size + 1).collect()
        except Exception as exc:
            raise self._error(exc) from None
        if len(rows) <= size and self._count is None:
            self._count = offset + len(rows)  # the last page: the count is known without a job
        return [list(r) for r in rows[:size]], len(rows) > size

    def count(self) -> int:
        """Rows in the whole result (a Spark job, once)."""
        if self._count is None:
            self._bind()
            try:
                self._count = self.df.count()
            except Exception as exc:
                raise self._error(exc) from None
        return self._count

    @property
    def known_count(self) -> int | None:
        return self._count

    def to_arrow(self, limit: int | None = None):
        """The whole result (or its first `limit` rows) as a pyarrow Table, over Spark's own connection (the Python
        API's eager type: the rows do reach this process, unlike page())."""
        self._bind()
        try:
            frame = self.df if limit is None else self.df.limit(limit)
            return frame.toArrow()
        except Exception as exc:
            raise self._error(exc) from None

    # ----------------------------------------------------------------------------------------- export

    def export(self, target: str | Path, fmt: str | None = None) -> Path:
        """Write the whole result to one file inside the project (CSV with a header, or Parquet), from Spark."""
        root = self.state.root.resolve()
        path = Path(target)
        path = (path if path.is_absolute() else root / path).resolve()
        fmt = (fmt or path.suffix.lstrip(".")).lower()
        if fmt not in EXPORT_FORMATS:
            raise RatuiError("RAT-QRY-001", f"cannot export as '{fmt or path.name}': csv or parquet",
                             file=str(target))
        if not path.is_relative_to(root):
            raise RatuiError("RAT-QRY-002", f"{target} is outside the project", file=str(target))
        if path.exists():
            raise RatuiError("RAT-QRY-003", f"{path.relative_to(root)} exists already", file=str(target))
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.part"
        self._bind()
        if not spark_is_local(self.state.settings):
            return self._export_here(path, staging, fmt)
        try:
            writer = self.df.coalesce(1).write.mode("error")
            if fmt == "csv":
                writer.option("header", True).csv(str(staging))
            else:
                writer.parquet(str(staging))
            parts = sorted(staging.glob(f"part-*.{fmt}*")) or sorted(staging.glob("part-*"))
            if not parts:
                raise RatuiError("RAT-QRY-001", f"Spark wrote no {fmt} file for the result", file=str(target))
            parts[0].replace(path)
        except RatuiError:
            raise
        except Exception as exc:
            raise self._error(exc) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return path

    def _export_here(self, path: Path, staging: Path, fmt: str) -> Path:
        """Export through this process: the result comes back over Spark's own connection (Arrow batches) and is
        written here. A Spark that is not local (a cluster's executors, a Connect server) cannot write into this
        machine's project folder; the whole result passes through this process's memory."""
        import pyarrow.csv as pa_csv
        import pyarrow.parquet as pq

        try:
            table = self.df.toArrow()
        except Exception as exc:
            raise self._error(exc) from None
        try:
            if fmt == "csv":
                pa_csv.write_csv(table, str(staging))
            else:
                pq.write_table(table, str(staging))
            staging.replace(path)
        finally:
            staging.unlink(missing_ok=True)
        return path

    # ------------------------------------------------------------------------------------------- misc

    def close(self) -> None:
        spark_jobs.end_run(self.query_id)
        spark_mod.release(self.session)

    def _bind(self) -> None:
        # job groups and Connect tags belong to the thread that runs the job: every call binds its own thread
        spark_jobs.bind_thread(self.session, self.query_id)

    def _error(self, exc: BaseException) -> RatuiError:
        if is_cancellation(exc):
            return RatuiError("RAT-QRY-004", "the query was cancelled")
        if is_unreachable(exc):
            return RatuiError(UNREACHABLE_CODE, f"Spark cannot be reached: {str(exc).splitlines()[0]}")
        return storage_failure(exc) or query_error(exc, self.ref, self.keys)


def cancel(query_id: str) -> None:
    """Interrupt the query's running Spark jobs (from any thread)."""
    spark_jobs.cancel_run(query_id)


def run_query(state: ProjectState, session, sql: str, *, ref: str = MAIN,
              limit: int = 1000) -> tuple[list[str], list[list[Any]], bool]:
    """Run `sql` on `session` (a Spark session of its own) over the tables of `ref`: (columns, rows, truncated)."""
    result = QueryResult(state, session, sql, ref=ref)
    rows, more = result.page(0, limit)
    spark_jobs.end_run(result.query_id)
    return result.columns, rows, more
