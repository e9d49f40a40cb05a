"""The rows of the landing ledger as Python reads them (ledger.py writes them, ledger_reads.py reads them):
`LandingFile` (a row of landing_files), `LedgerSummary` (its counts), and the few helpers both sides share: the
columns in LandingFile's order, LIKE patterns for archived names, JSON parameters, a connection that closes."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Any, Iterable, NamedTuple

from ratui.engine.landing.names import PROCESSED, is_archived_name


class LandingFile(NamedTuple):
    """A row of landing_files. A named tuple, not a dataclass: a zone of 100,000 files is read back as 100,000 of
    them on every sync, and a tuple is made from a database row in C (a fifth of the time of filling dataclass
    objects); it is immutable, hashable and compared by value all the same. Compare it only with LandingFiles."""
    namespace: str
    zone: str
    pipeline: str
    file: str
    size: int
    mtime_ns: int
    state: str
    run_id: str | None
    attempts: int
    last_error: str | None
    archived_to: str | None
    updated_at: str
    purged_at: str | None = None
    loaded_at: str | None = None

    @property
    def archived(self) -> bool:
        return is_archived_name(self.file)

    @property
    def name(self) -> str:
        """The file's own name, wherever it is now."""
        return self.file.rsplit("/", 1)[-1]

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class LedgerSummary:
    """The ledger's row counts: (namespace, zone, state) -> rows."""
    counts: dict[tuple[str, str, str], int]

    @property
    def files(self) -> int:
        return sum(self.counts.values())

    @property
    def zones(self) -> int:
        return len({(ns, zone) for ns, zone, _ in self.counts})

    def state(self, state: str) -> int:
        return sum(n for (_, _, s), n in self.counts.items() if s == state)

    def zone(self, namespace: str, zone: str) -> int:
        return sum(n for (ns, z, _), n in self.counts.items() if (ns, z) == (namespace, zone))


def like_text(text: str) -> str:
    """`text` as itself in a LIKE pattern (ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


ARCHIVED_LIKE = like_text(PROCESSED) + "/%"  # every archived name (ESCAPE '\\')


def like_archived(name: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for every archived version of a file name."""
    return f"{ARCHIVED_LIKE}/{like_text(name)}"



# a main row as undo saves it (LedgerReads.loads_after, Ledger.reset) and puts it back (Ledger.put_back)
SAVED_FIELDS = ("namespace", "zone", "pipeline", "file", "state", "run_id", "attempts", "last_error", "loaded_at",
                 "updated_at")
SAVED = ", ".join(SAVED_FIELDS)


def with_state(entry: LandingFile, **changes: Any) -> LandingFile:
    return entry._replace(**changes)


def json_param(rows: list) -> str:
    return json.dumps(rows, separators=(",", ":"))


FIELDS = LandingFile._fields
COLUMNS = ", ".join(FIELDS)  # a query's columns in the order of LandingFile's fields


def landing_rows(cur: sqlite3.Cursor) -> list[LandingFile]:
    """The LandingFiles of a query's rows (`SELECT *` or `SELECT {COLUMNS}, ...`): the columns matched to the
    fields once, not per row."""
    cur.row_factory = None
    names = [d[0] for d in cur.description]
    index = {n: i for i, n in enumerate(names)}
    return landing_files(cur, tuple(index.get(f, -1) for f in FIELDS))


def landing_files(rows: Iterable[tuple], picks: tuple[int, ...] | None = None) -> list[LandingFile]:
    """LandingFiles of rows whose first columns are its fields in order (`picks` None), or of rows whose columns
    `picks` names per field (-1: not there, None)."""
    if picks is None or picks == tuple(range(len(FIELDS))):
        return list(map(MAKE_ROW, rows))
    return [MAKE_ROW(r[i] if i >= 0 else None for i in picks) for r in rows]


MAKE_ROW = partial(tuple.__new__, LandingFile)  # LandingFile._make without its per-row length check in Python: every
# row given here has exactly its fields (a query's columns in FIELDS's order, or ROW_HEAD of LedgerReads._read()'s rows)
ROW_HEAD = itemgetter(slice(0, len(FIELDS)))
BRIEF_COLUMNS = ", ".join(FIELDS[3:])  # LedgerReads._read_brief(): the fields after namespace, zone and pipeline
BRIEF_HEAD = itemgetter(slice(0, len(FIELDS) - 3))


class Closing:
    """A connection that closes when its `with` block ends (sqlite3's own context manager only commits)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: Any) -> None:
        self.conn.close()

