"""Reading landing files into Spark: columns by name, every file looked at first, bad rows never silent.

Before Spark reads anything, each file gets a cheap look at its bytes (never its rows):

    empty (0 bytes)                        left out, with a warning naming it (RAT-LND-009)
    CSV / JSON with NUL bytes or not UTF-8 RAT-LND-008, with the line of the first bad byte
    Parquet without its magic bytes, or    RAT-LND-008
      whose footer cannot be read
    CSV header: an empty or repeated name  RAT-LND-006, line 1

Columns map by name in every file. Spark applies one schema to a folder of CSV files by position, so files are
grouped by header; each group is read with the zone's schema in that group's own column order, and the groups
are united by name. Files whose columns differ from the zone's (the first file read) are an error naming the
file (RAT-LND-006), or, with `landing.columns: union`, read with the missing columns as NULL. Parquet files are
compared the same way from their footers, and a column whose type differs between files is an error.

Malformed CSV rows (a wrong number of fields, a broken quote) and JSON lines that do not parse are found by
Spark's own parser (PERMISSIVE mode with a corrupt-record column, column pruning off so that every field is
checked whatever the query selects). By default the run fails naming the file and the line of the first bad row
(RAT-LND-007); with `landing.bad_rows: skip` the rows are left out and their count and first lines are kept with
the run.

File names Hadoop would misread (`:`, glob characters `[]{}*?`, `%`, ...) are hard-linked under safe names into
the run's staging folder first; errors still name the original file. An object read in place cannot be linked:
Spark gets its URI with the glob characters escaped (`\\[`), which Hadoop reads as exactly that name.

A file is a local path, an object read in place, or a local file with a copy Spark can reach (files.py): the
checks read its bytes through ZoneFile (an object's first MB, its Parquet footer, its lines for a bad row's line
number: ranged GETs pinned to the listed ETag), Spark reads `spark_path()`.

Each format's own reading is its module's in formats/ (found through FORMATS: no format imports this module); what
they share with the reader is read_contract.py and read_checks.py.

Schema inference and the bad-row check each cost a pass over the files. For small plain CSV files (no quotes, every
row as wide as the header, each column of one clear kind: csv_types.py) ratui finds Spark's types in Python, which
also shows that no row is malformed, so neither Spark pass runs: in a JVM that has just started they cost about a
second. Both depend only on the files' bytes (and the schema read with), so the process remembers them per set of
files, by each file's path, size, modification time and inode: the edit-and-rerun loop (a full_refresh pipeline
re-reading the same files, watch mode after a save) skips both passes, and any rewritten file is read afresh.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Iterable
from urllib.parse import unquote, urlparse

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile
from ratui.engine.landing.formats import FORMATS
from ratui.engine.landing.read_checks import CLEAN, file_set
from ratui.engine.landing.read_contract import CORRUPT, FILE, BadRow, ReadReport
from ratui.engine.sql_text import quote

SAMPLE_BAD_ROWS = 5
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._/ +=@-]+$")
_GLOB = re.compile(r"([\\\[\]{}*?])")  # what Hadoop's path globbing reads as a pattern, escaped with a backslash


def _uri_path(uri: str) -> str:
    """The path ratui gave Spark for the URI Spark's `_metadata.file_path` names it by (URL-encoded)."""
    if uri.startswith("file:"):
        return os.path.normpath(unquote(urlparse(uri).path))
    if "://" in uri:
        return unquote(uri)
    return os.path.normpath(uri)


# -------------------------------------------------------------------------------------------------- reader


class ZoneReader:
    """Reads one zone's files for one run (what the formats get: read_contract.ZoneReading). `staging`: a folder of
    the run (safe-named links go there)."""

    def __init__(self, session, zone: str, fmt: str, *, bad_rows: str = "fail", columns: str = "strict",
                 staging: Path, check_rows: bool = True):
        """`check_rows=False`: the DataFrame is only wanted for its columns (no job looks for bad rows)."""
        self.session = session
        self.check_rows = check_rows
        self.zone = zone
        self.fmt = fmt
        self.bad_rows = bad_rows
        self.columns = columns
        self.staging = staging
        self.report = ReadReport()
        self._by_spark_path: dict[str, ZoneFile] = {}

    # -------------------------------------------------------------------------------------------- paths

    def spark_path(self, zf: ZoneFile) -> str:
        """A path Spark reads as exactly this file: the file itself, or a safe-named hard link to it; an object's
        URI (or its copy's where Spark can reach it)."""
        if zf.spark_uri is not None:
            self._by_spark_path[zf.spark_uri] = zf  # Spark names it URL-encoded: see _uri_path
            return _GLOB.sub(r"\\\1", zf.spark_uri)
        assert zf.path is not None
        path = str(zf.path)
        if not _SAFE_PATH.match(path):
            folder = self.staging / "landing" / self.zone
            folder.mkdir(parents=True, exist_ok=True)
            safe = folder / f"f{len(self._by_spark_path):05d}{zf.path.suffix.lower()}"
            try:
                os.link(zf.path, safe)
            except OSError:  # another file system
                shutil.copy2(zf.path, safe)
            path = str(safe)
        self._by_spark_path[os.path.normpath(path)] = zf
        return path

    def origin(self, uri: str) -> ZoneFile | None:
        return self._by_spark_path.get(_uri_path(uri))

    def name_of(self, uri: str) -> str:
        origin = self.origin(uri)
        return origin.name if origin is not None else uri

    # --------------------------------------------------------------------------------------------- read

    def read(self, files: list[ZoneFile]):
        """A DataFrame over the files (None when every one of them is empty), after the checks above."""
        present = []
        for zf in files:
            if zf.size == 0:
                self.report.notes.append(f"RAT-LND-009 {zf.name}: empty landing file in zone '{self.zone}', "
                                         "loaded as zero rows")
                continue
            present.append(zf)
        self.report.files_read = len(present)
        if not present:
            return None
        return FORMATS[self.fmt].read(self, present)

    # ----------------------------------------------------------------------------------------- bad rows

    def bad_rows_of(self, df, only_bad: bool = False, read_from: list[ZoneFile] | None = None):
        """Count the rows Spark could not parse (one job); fail on them, or leave them out and report them.
        `read_from`: the files df reads, when a clean result may be remembered for them."""
        from pyspark.sql import functions as F

        if not self.check_rows:
            return df.drop(CORRUPT, FILE)
        key = (self.fmt, file_set(read_from), df.schema.json()) if read_from else None
        if key is not None and CLEAN.get(key):
            return df.drop(CORRUPT, FILE)
        data_cols = [c for c in df.columns if c not in (CORRUPT, FILE)]
        bad = df.where(F.col(CORRUPT).isNotNull())
        # Spark refuses a query over the corrupt column alone: count a data column along with it
        rows = (bad.groupBy(F.col(FILE).alias("path"))
                .agg(F.count(F.lit(1)).alias("n"),
                     F.slice(F.collect_list(CORRUPT), 1, SAMPLE_BAD_ROWS).alias("first"),
                     F.count(F.col(quote(data_cols[0]))).alias("_"))
                .collect())
        if not rows:
            if key is not None:
                CLEAN.put(key, True)
            return df.drop(CORRUPT, FILE)
        total = sum(r.n for r in rows)
        samples: list[BadRow] = []
        first_file: ZoneFile | None = None
        for r in sorted(rows, key=lambda r: self.name_of(r.path)):
            zf = self.origin(r.path)
            if zf is None:
                continue
            first_file = first_file or zf
            lines = _find_lines(zf, list(r.first), header=self.fmt == "csv")
            samples.extend(BadRow(zf.name, line, text[:200]) for text, line in zip(r.first, lines))
        samples = sorted(samples, key=lambda b: (b.file, b.line or 0))[:SAMPLE_BAD_ROWS]
        what = "line" if self.fmt == "json" else "row"
        if self.bad_rows != "skip" or only_bad:
            first = samples[0] if samples else None
            files = sorted({s.file for s in samples})
            raise RatuiError(
                "RAT-LND-007",
                f"{total} malformed {what}(s) in landing zone '{self.zone}' ({', '.join(files)})"
                + (f"; first at line {first.line}: {first.text[:120]!r}" if first and first.line else
                   f"; first: {first.text[:120]!r}" if first else ""),
                file=first_file.where if first_file else None, line=first.line if first else None,
                details={"bad_rows": total, "samples": [s.__dict__ for s in samples]},
                hint=None if self.bad_rows == "skip" else (
                    "Fix the rows shown, or set `landing: {bad_rows: skip}` in ratui.yaml to leave them out (their "
                    "count and first lines are kept with the run)." + (
                        " A quoted CSV field that spans lines is not supported." if self.fmt == "csv" else "")),
            )
        self.report.bad_rows += total
        self.report.samples.extend(samples)
        where = ", ".join(f"{s.file}:{s.line}" if s.line else s.file for s in samples)
        self.report.notes.append(f"RAT-LND-007 {total} malformed {what}(s) in zone '{self.zone}' left out "
                                 f"(landing.bad_rows: skip); first at {where}")
        return df.where(F.col(CORRUPT).isNull()).drop(CORRUPT, FILE)


def _find_lines(zf: ZoneFile, records: Iterable[str], header: bool = False) -> list[int | None]:
    """The 1-based line number of each bad record's text in the file (the first unclaimed match). `header`: line 1
    is the file's header, never a row (a row repeating it is found further down)."""
    wanted = [r.rstrip("\r\n") for r in records]
    found: list[int | None] = [None] * len(wanted)
    pending = {i for i in range(len(wanted))}
    lines = zf.lines()
    for number, raw in enumerate(lines, start=1):
        if not pending:
            break
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if number == 1:
            if header:
                continue
            text = text.lstrip("\ufeff")
        for i in sorted(pending):
            if wanted[i] == text:
                found[i] = number
                pending.discard(i)
                break
    close = getattr(lines, "close", None)
    if close is not None:
        close()  # an object's stream: not read to its end
    return found
