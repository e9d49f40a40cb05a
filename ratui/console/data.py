"""What the console shows of the data: a query's pages, a table's description, the query history.

Textual-free. A query's result stays on Spark (engine/run/query.py); the console holds its id and one page
(`QueryPage`) at a time. The query history is the project's `.ratui/query_history.jsonl`, one query a line, newest
last, kept to its last HISTORY_LIMIT entries.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("ratui.console")

HISTORY_FILE = ".ratui/query_history.jsonl"
HISTORY_LIMIT = 200

PAGE_SIZE = 200  # rows a page of the Query screen holds


@dataclass(frozen=True)
class QueryPage:
    query_id: str
    ref: str
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    offset: int
    more: bool  # rows follow this page
    count: int | None  # rows in the whole result, once known
    seconds: float  # how long this page took

    @property
    def page(self) -> int:
        return self.offset // PAGE_SIZE

    def describe(self) -> str:
        if not self.rows:
            return "no rows" if self.offset == 0 else f"no rows after {self.offset:,}"
        first, last = self.offset + 1, self.offset + len(self.rows)
        total = f"{self.count:,}" if self.count is not None else (f"{last:,}+" if self.more else f"{last:,}")
        return f"rows {first:,}-{last:,} of {total}"


class QueryHistory:
    """The project's query history file (read and appended from worker threads)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / HISTORY_FILE
        self._lock = threading.Lock()

    def load(self) -> list[str]:
        """The queries, oldest first (a line that does not parse is left out, never fatal)."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("sql"), str):
                out.append(entry["sql"])
        return out

    def add(self, sql: str) -> list[str]:
        """Remember `sql` (moved to the end if it was there already); returns the history."""
        sql = sql.strip()
        with self._lock:
            queries = [q for q in self.load() if q != sql]
            if sql:
                queries.append(sql)
            queries = queries[-HISTORY_LIMIT:]
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                part = self.path.with_suffix(".part")
                part.write_text("".join(json.dumps({"sql": q}) + "\n" for q in queries), encoding="utf-8")
                part.replace(self.path)
            except OSError as exc:  # a read-only project: the query still runs, only its history is not kept
                log.warning("query history not saved in %s: %s", self.path, exc)
        return queries


def table_completions(prefix: str, keys: list[str], namespace: str) -> list[str]:
    """Table names that complete `prefix`: `layer.name` for the project's namespace, `namespace.layer.name` for
    another, matched on the short or the full form (case-insensitive)."""
    prefix = prefix.lower()
    out = []
    for key in keys:
        short = key.split(".", 1)[1] if key.startswith(namespace + ".") else key
        name = key.rsplit(".", 1)[1]
        if short.lower().startswith(prefix) or key.lower().startswith(prefix) or name.startswith(prefix):
            out.append(short)
    return sorted(set(out))


def parse_ref_spec(text: str, current: str = "main") -> tuple[str, str | None] | None:
    """What the Query screen's ref prompt took, as (ref, time or None) for the engine's resolve_ref:

        dev                       -> ("dev", None)
        main@3f2a9c1b             -> ("main@3f2a9c1b", None)      a past state by commit hash
        @3f2a9c1b                 -> (current ref@3f2a9c1b, None)
        main at 2026-03-01 10:00  -> ("main", "2026-03-01 10:00")  the state at that time (UTC unless a zone)
        at 2026-03-01             -> (current ref, "2026-03-01")

    None for an empty text. The engine checks what it names (RAT-CAT-002 / -010, RAT-CLI-001 for a bad time)."""
    text = " ".join(text.split())
    if not text:
        return None
    base = current.partition("@")[0] or "main"
    head, sep, when = text.partition(" at ")
    if not sep and text.lower().startswith("at "):
        head, sep, when = "", " at ", text[3:]
    if sep:
        return (head.strip() or base).partition("@")[0], when.strip() or None
    if text.startswith("@"):
        return f"{base}{text}", None
    return text, None
