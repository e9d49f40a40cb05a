"""What reading a zone's files shares between the reader (reader.py) and the file formats (formats/): a format's
declaration (`Format`), what the reader offers a format while it reads (`ZoneReading`), the columns a read adds
for the bad-row check, and the report a read leaves.

A format module imports this and read_checks.py, never the reader: the reader finds the formats through
formats/__init__.py's FORMATS, so nothing imports back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ratui.engine.landing.files import ZoneFile

CORRUPT = "__ratui_bad_row"  # Spark's corrupt-record column: the text of a row it could not parse
FILE = "__ratui_file"  # each row's file, kept until the bad-row check (a union has no _metadata)


def with_file(df):
    """`df` with each row's file (FILE), for the bad-row check to name it."""
    from pyspark.sql import functions as F

    return df.withColumn(FILE, F.col("_metadata.file_path"))


@dataclass
class BadRow:
    file: str  # ledger name
    line: int | None
    text: str


@dataclass
class ReadReport:
    notes: list[str] = field(default_factory=list)  # warnings, each starting with its code
    bad_rows: int = 0
    samples: list[BadRow] = field(default_factory=list)
    files_read: int = 0
    delimiters: dict[str, str] = field(default_factory=dict)  # CSV files read with another delimiter than a comma

    def to_dict(self) -> dict[str, Any]:
        return {"notes": self.notes, "bad_rows": self.bad_rows, "files_read": self.files_read,
                "samples": [s.__dict__ for s in self.samples]}


class ZoneReading(Protocol):
    """What a format's `read` is given: one zone's read for one run (reader.py's ZoneReader)."""

    session: Any  # the run's SparkSession
    zone: str
    columns: str  # landing.columns: strict (every file the zone's columns) | union
    bad_rows: str  # landing.bad_rows: fail | skip
    check_rows: bool  # False: the DataFrame is only wanted for its columns (no bad-row job)
    report: ReadReport

    def spark_path(self, zf: ZoneFile) -> str:
        """A path Spark reads as exactly this file."""
        ...

    def origin(self, uri: str) -> ZoneFile | None:
        """The file Spark names by `uri` (its `_metadata.file_path`)."""
        ...

    def bad_rows_of(self, df, only_bad: bool = False, read_from: list[ZoneFile] | None = None):
        """`df` (with CORRUPT and FILE) without those columns, after its bad rows failed the run or were left out."""
        ...


@dataclass(frozen=True)
class Format:
    """A landing file format, declared as FORMAT by its own module in formats/ and listed once in FORMATS
    (formats/__init__.py): everything ratui does with its files is here."""

    name: str
    suffixes: tuple[str, ...]  # the file names that are this format, lower case
    read: Callable[[ZoneReading, list[ZoneFile]], Any]  # a DataFrame over the (non-empty) files, checked
    columns: Callable[[ZoneFile], list[str]]  # the columns one file names, from its first bytes or footer (never
    # its rows): a zone's columns in column lineage (zone_columns.py)
    columns_by_name: bool = False  # Spark orders the zone's columns by name (inferred JSON), not as the files do
