"""The Engine's queries and table reads: ad-hoc SQL over the tables at a ref (at once, or kept on Spark for paging
and export), a table described from its metadata, its first rows."""

from __future__ import annotations

from typing import Any

from ratui.engine.facade.base import EngineBase
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.spark import session as spark_mod
from ratui.engine.vocabulary import MAIN


class QueriesPart(EngineBase):
    def query(self, sql: str, *, ref: str = MAIN, limit: int = 1000) -> tuple[list[str], list[list[Any]], bool]:
        """Ad-hoc SQL over the tables at a ref: (columns, rows, truncated)."""
        from ratui.engine.run.query import run_query

        self._state.catalog.get_ref(ref)  # RAT-CAT-002 for a mistyped ref, before any JVM starts
        session = spark_mod.new_session(self.settings)
        try:
            return run_query(self._state, session, sql, ref=ref, limit=limit)
        finally:
            spark_mod.release(session)

    def open_query(self, sql: str, *, ref: str = MAIN, query_id: str | None = None, read_only: bool = False):
        """A QueryResult kept on Spark (pages, count, export); close() it when done. Cancel with cancel_query.
        `read_only`: a query that does anything but read the project's tables is refused (RAT-ACC-002)."""
        from ratui.engine.run.query import QueryResult

        self._state.catalog.get_ref(ref)  # RAT-CAT-002 before Spark starts
        if read_only:  # and a query that is not a read, before Spark starts
            from ratui.engine.run.read_only_sql import check_read_only

            check_read_only(sql, set(self._state.catalog.table_pointers(ref)), self.settings.namespace)
        session = spark_mod.new_session(self.settings)
        try:
            return QueryResult(self._state, session, sql, ref=ref, query_id=query_id, read_only=read_only)
        except BaseException:
            spark_mod.release(session)
            raise

    def query_progress(self, query_id: str) -> dict | None:
        """What a running query's Spark jobs are doing (SparkProgress's fields), or None."""
        return spark_jobs.progress(query_id)

    def cancel_query(self, query_id: str) -> None:
        from ratui.engine.run.query import cancel

        cancel(query_id)

    def describe_table(self, ref: str, key: str):
        """A table's schema, partition spec, snapshot history and column statistics from its metadata (no scan)."""
        from ratui.engine.iceberg.describe import describe

        return describe(self._state.catalog.load_table(ref, key), key)

    def preview_table(self, ref: str, key: str, limit: int = 20) -> tuple[list[str], list[list[Any]]]:
        """The first rows of a table at a ref (Spark reads them, deletes applied)."""
        from ratui.engine.iceberg.read import read_table

        session = spark_mod.new_session(self.settings)
        try:
            df = read_table(session, self._state.catalog.load_table(ref, key))
            return list(df.columns), [list(r) for r in df.limit(limit).collect()]
        finally:
            spark_mod.release(session)
