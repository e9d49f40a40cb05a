"""The Query screen's half of the controller: the refs and tables a query can read, a query's result held on
Spark and handed over a page at a time, its count, progress, cancelling and export, and a table's description and
preview.

A mixin of Controller: every method blocks (Spark, the catalog), so the screen calls them from thread workers. A
result stays on Spark until `close_query` (or the controller's close); the console holds one page of it. Textual-free.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ratui.console.data import QueryPage
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN


class QuerySessions:
    """The controller's queries (Controller's __init__ sets the state they use: engine, _queries, _lock,
    query_history, read_only)."""

    def table_names(self, ref: str = MAIN) -> list[str]:
        """The tables at a ref (keys), for the Query screen's completion and table list."""
        return sorted(self.require_engine().table_pointers(ref))

    def query_refs(self) -> list[str]:
        """What a query can read: main first, then every other ref (dev branches, run branches while they live)."""
        names = [r.name for r in self.require_engine().refs()]
        return [MAIN] + sorted(n for n in names if n != MAIN)

    def open_query(self, sql: str, ref: str, query_id: str) -> "QueryPage":
        """Run a query and fetch its first page; the result stays on Spark until close_query. The query goes into
        the history whether it works or not (a failed one is the one to fix)."""
        engine = self.require_engine()
        if not self.read_only:  # a read-only console leaves no trace in the project, its query history included
            self.query_history.add(sql)
        started = time.perf_counter()
        result = engine.open_query(sql, ref=ref, query_id=query_id, read_only=self.read_only)
        with self._lock:
            self._queries[query_id] = result
        try:
            return self._fetch_page(result, 0, started)
        except BaseException:
            self.close_query(query_id)
            raise

    def query_page(self, query_id: str, offset: int) -> "QueryPage":
        return self._fetch_page(self._held_result(query_id), max(0, offset), time.perf_counter())

    def query_count(self, query_id: str) -> int:
        return self._held_result(query_id).count()

    def export_query(self, query_id: str, target: str) -> Path:
        self._writable("exporting a result to a file")
        return self._held_result(query_id).export(target)

    def query_progress(self, query_id: str) -> tuple[str, Any]:
        """(query id, its running Spark jobs' progress as a SparkProgress, or None)."""
        from ratui.engine.events import SparkProgress

        fields = self.require_engine().query_progress(query_id)
        return query_id, SparkProgress(query_id, **fields) if fields else None

    def cancel_query(self, query_id: str) -> None:
        self.require_engine().cancel_query(query_id)

    def close_query(self, query_id: str) -> None:
        with self._lock:
            result = self._queries.pop(query_id, None)
        if result is not None:
            result.close()

    def _held_result(self, query_id: str):
        with self._lock:
            result = self._queries.get(query_id)
        if result is None:
            raise RatuiError("RAT-QRY-004", "that query's result is gone (a newer query replaced it)")
        return result

    @staticmethod
    def _fetch_page(result, offset: int, started: float) -> "QueryPage":
        from ratui.console.data import PAGE_SIZE, QueryPage

        rows, more = result.page(offset, PAGE_SIZE)
        return QueryPage(result.query_id, result.ref, result.columns, result.types, rows, offset, more,
                         result.known_count, time.perf_counter() - started)

    def describe_table(self, ref: str, key: str):
        """A table's schema, partition spec, snapshot history and column statistics (metadata only)."""
        return self.require_engine().describe_table(ref, key)

    def preview_table(self, ref: str, key: str, limit: int = 20) -> tuple[list[str], list[list[Any]]]:
        """The first rows of a table (starts Spark if it is not up)."""
        return self.require_engine().preview_table(ref, key, limit)
