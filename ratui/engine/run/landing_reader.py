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
the run's staging folder first; errors still name the original file.

Schema inference and the bad-row check each cost a pass over the files. For small plain CSV files (no quotes, every
row as wide as the header, each column of one clear kind: csv_types.py) ratui finds Spark's types in Python, which
also shows that no row is malformed, so neither Spark pass runs: in a JVM that has just started they cost about a
second. Both depend only on the files' bytes (and the schema read with), so the process remembers them per set of
files, by each file's path, size, modification time and inode: the edit-and-rerun loop (a full_refresh pipeline
re-reading the same files, watch mode after a save) skips both passes, and any rewritten file is read afresh.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import unquote, urlparse

from ratui.engine.errors import RatuiError
from ratui.engine.run.csv_types import csv_types
from ratui.engine.spark.sql_text import quote

CORRUPT = "__ratui_bad_row"
FILE = "__ratui_file"  # each row's file, kept until the bad-row check (a union has no _metadata)
SAMPLE_BAD_ROWS = 5
PREFIX_BYTES = 1 << 20  # how much of a text file is checked for binary data and UTF-8
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._/ +=@-]+$")


class _Memo:
    """A small thread-safe LRU map: file-set identity -> what a pass over those files found."""

    def __init__(self, size: int = 512):
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            return None

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_INFERRED = _Memo()  # (format, files[, header]) -> the schema inferred, as JSON (CSV: with "no row malformed")
_CLEAN = _Memo()  # (format, files, schema JSON) -> True: a bad-row check over exactly these found none


def _identity(files: list["ZoneFile"]) -> tuple:
    """What makes a pass over these files give the same answer: each file's path, size, mtime and inode."""
    out = []
    for zf in files:
        st = zf.path.stat()
        out.append((str(zf.path), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


@dataclass(frozen=True)
class ZoneFile:
    """One file to read: where it is now, and its name in the ledger (relative to the zone folder)."""

    path: Path
    name: str
    origin: str | None = None  # where the file really is when `path` is a staged copy (an s3:// URI)

    @property
    def where(self) -> str:
        """What an error names: the object's URI for a staged copy, else the file."""
        return self.origin or str(self.path)


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


# ------------------------------------------------------------------------------------------ looking at bytes


def _first_bad_byte_line(data: bytes) -> tuple[str, int] | None:
    """('binary data' | 'not UTF-8', line) for the first problem in `data`, or None."""
    nul = data.find(b"\x00")
    try:
        text_end = len(data)
        data.decode("utf-8")
        bad = None
    except UnicodeDecodeError as exc:
        # a character cut by the prefix's end is not an error
        bad = None if exc.start >= len(data) - 3 and exc.reason == "unexpected end of data" else exc.start
        text_end = exc.start
    if nul != -1 and (bad is None or nul <= bad):
        return "binary data (NUL bytes)", data.count(b"\n", 0, nul) + 1
    if bad is not None:
        return "not UTF-8 text", data.count(b"\n", 0, text_end) + 1
    return None


def _check_text(zf: ZoneFile, kind: str) -> bytes:
    with open(zf.path, "rb") as fh:
        data = fh.read(PREFIX_BYTES)
    problem = _first_bad_byte_line(data)
    if problem:
        what, line = problem
        raise RatuiError("RAT-LND-008", f"landing file '{zf.name}' is not a {kind} file: {what} at line {line}",
                         file=zf.where, line=line)
    return data


DELIMITERS = (";", "\t", "|")  # besides the comma: what spreadsheets and databases export with
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}


def csv_layout(zf: ZoneFile) -> tuple[str, list[str]]:
    """A CSV file's delimiter (_delimiter) and header (csv_header), from one read of its first bytes."""
    text = _csv_text(zf)
    delimiter = _delimiter(text)
    return delimiter, csv_header(zf, delimiter, text)


def _csv_text(zf: ZoneFile) -> str:
    """A CSV file's first bytes, checked (_check_text) and decoded, without a byte-order mark."""
    return _check_text(zf, "CSV").decode("utf-8", errors="ignore").lstrip("\ufeff")


def _delimiter(text: str) -> str:
    """The character between a CSV file's fields: a comma, unless the header has none and one of `DELIMITERS`
    splits it into fields and at least half of the next rows (up to six) into as many (a malformed row among them
    is then reported as such, at its line). `text`: the file's first bytes, decoded."""
    head = text[:1 << 16].splitlines()[:8]
    if len(text) > 1 << 16 and len(head) < 8:
        head = head[:-1]  # the last line read may be cut short
    lines = [line for line in head if line.strip()][:7]
    if not lines or "," in lines[0]:
        return ","
    for delimiter in sorted(DELIMITERS, key=lambda d: -lines[0].count(d)):
        if delimiter not in lines[0]:
            break
        header, *rows = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
        if 2 * sum(len(row) == len(header) for row in rows) >= len(rows):
            return delimiter
    return ","


def csv_header(zf: ZoneFile, delimiter: str = ",", text: str | None = None) -> list[str]:
    """The header row of a CSV file (BOM stripped), checked for empty and repeated names. `text`: the file's
    first bytes, decoded, when already read."""
    if text is None:
        text = _csv_text(zf)
    first = next(csv.reader(io.StringIO(text), delimiter=delimiter), [])
    names = [name.strip() for name in first]
    if not names or all(not n for n in names):
        raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' has no header row", file=zf.where, line=1,
                         hint="The first line of a CSV landing file names its columns.")
    seen: dict[str, str] = {}
    for i, name in enumerate(names, start=1):
        if not name:
            raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' has an empty column name (column {i})",
                             file=zf.where, line=1, hint="Give every column of the header a name.")
        if "`" in name or any(ord(c) < 32 for c in name):
            raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' has a column name ratui cannot store: {name!r}",
                             file=zf.where, line=1, hint="Rename the column in the file: no backticks or "
                             "control characters in column names.")
        if name.lower() in seen:
            raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' names column '{name}' twice",
                             file=zf.where, line=1,
                             hint="Column names must be distinct (case does not count).")
        seen[name.lower()] = name
    return names


def parquet_schema(zf: ZoneFile):
    import pyarrow.parquet as pq

    size = zf.path.stat().st_size
    with open(zf.path, "rb") as fh:
        head = fh.read(4)
        fh.seek(max(0, size - 4))
        tail = fh.read(4)
    if size < 12 or head != b"PAR1" or tail != b"PAR1":
        raise RatuiError("RAT-LND-008", f"landing file '{zf.name}' is not a Parquet file (no Parquet magic bytes)",
                         file=zf.where)
    try:
        return pq.read_schema(zf.path)
    except Exception as exc:  # a damaged footer
        raise RatuiError("RAT-LND-008", f"landing file '{zf.name}' is a damaged Parquet file: "
                         f"{str(exc).splitlines()[0][:200]}", file=zf.where) from None


def _compare_columns(zone: str, reference: ZoneFile, ref_cols: list[str], zf: ZoneFile, cols: list[str],
                     mode: str) -> None:
    if mode == "union":
        return
    want, have = {c.lower() for c in ref_cols}, {c.lower() for c in cols}
    if want == have:
        return
    missing = [c for c in ref_cols if c.lower() not in have]
    extra = [c for c in cols if c.lower() not in want]
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"extra {', '.join(extra)}"] if extra else [])
    raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' in zone '{zone}' has other columns than "
                     f"'{reference.name}': {'; '.join(parts)}", file=zf.where, line=1)


# ------------------------------------------------------------------------------------------- Spark types


def _wider(a, b):
    """The type both Spark-inferred CSV column types fit in (Spark's own widening, strings last)."""
    from pyspark.sql import types as st

    if a == b:
        return a
    ints = (st.IntegerType, st.LongType)
    nums = (st.IntegerType, st.LongType, st.DoubleType, st.FloatType, st.DecimalType)
    if isinstance(a, ints) and isinstance(b, ints):
        return st.LongType()
    if isinstance(a, nums) and isinstance(b, nums):
        return st.DoubleType()
    temporal = (st.DateType, st.TimestampType, st.TimestampNTZType)
    if isinstance(a, temporal) and isinstance(b, temporal):
        return st.TimestampType()
    return st.StringType()


def _reads_as(group_type, read_type) -> bool:
    """Every value Spark inferred as `group_type` also parses as `read_type` (the type across header groups)."""
    from pyspark.sql import types as st

    if group_type == read_type or isinstance(read_type, st.StringType):
        return True
    ints = (st.IntegerType, st.LongType)
    return isinstance(group_type, ints) and isinstance(read_type, (st.LongType, st.DoubleType))


def is_json_document(path: Path) -> bool:
    """Whether a JSON landing file holds one document rather than JSON lines: its first non-blank line is `{` or
    `[` alone, or starts an array it does not finish (a pretty-printed object or array). A first line that is a
    whole value, even an array, is JSON lines (Spark reads a line holding an array as a row per element)."""
    import json

    with open(path, "rb") as handle:
        while True:
            raw = handle.readline(1 << 20)  # a first line over 1 MB that starts an array: read as a document
            if not raw:
                return False
            line = raw.strip().lstrip(b"\xef\xbb\xbf").strip()  # a byte-order mark before the first line
            if not line:
                continue
            if line in (b"{", b"["):
                return True
            if not line.startswith(b"["):
                return False
            try:
                json.loads(line)
            except ValueError:
                return True
            return False


def json_error_line(path: Path, limit: int = 32 << 20) -> tuple[int | None, str]:
    """Where Python's JSON parser finds a document broken: (line, that line's text); (None, the first line) when
    it parses it (Spark refused it for another reason) or the file is over `limit` bytes."""
    import json

    if path.stat().st_size > limit:
        return None, ""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    lines = text.splitlines()
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno, lines[exc.lineno - 1].strip() if 0 < exc.lineno <= len(lines) else ""
    return None, lines[0].strip() if lines else ""


def _with_file(df):
    from pyspark.sql import functions as F

    return df.withColumn(FILE, F.col("_metadata.file_path"))




def _uri_path(uri: str) -> str:
    return os.path.normpath(unquote(urlparse(uri).path) if uri.startswith("file:") else uri)


# -------------------------------------------------------------------------------------------------- reader


class ZoneReader:
    """Reads one zone's files for one run. `staging`: a folder of the run (safe-named links go there)."""

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

    def _spark_path(self, zf: ZoneFile) -> str:
        """A path Spark reads as exactly this file: the file itself, or a safe-named hard link to it."""
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

    def _origin(self, uri: str) -> ZoneFile | None:
        return self._by_spark_path.get(_uri_path(uri))

    def _name_of(self, uri: str) -> str:
        origin = self._origin(uri)
        return origin.name if origin is not None else uri

    # --------------------------------------------------------------------------------------------- read

    def read(self, files: list[ZoneFile]):
        """A DataFrame over the files (None when every one of them is empty), after the checks above."""
        present = []
        for zf in files:
            if zf.path.stat().st_size == 0:
                self.report.notes.append(f"RAT-LND-009 {zf.name}: empty landing file in zone '{self.zone}', "
                                         "loaded as zero rows")
                continue
            present.append(zf)
        self.report.files_read = len(present)
        if not present:
            return None
        if self.fmt == "csv":
            df = self._csv(present)
        elif self.fmt == "json":
            df = self._json(present)
        else:
            df = self._parquet(present)
        return df

    def _csv(self, files: list[ZoneFile]):
        from pyspark.sql import types as st

        # files with the same header and delimiter read together: a group
        groups: dict[tuple[tuple[str, ...], str], list[ZoneFile]] = {}
        layouts = {zf.name: csv_layout(zf) for zf in files}
        reference, ref_cols = files[0], layouts[files[0].name][1]  # the zone's columns: its first file's
        for zf in files:
            delimiter, cols = layouts[zf.name]
            if delimiter != ",":
                self.report.delimiters[zf.name] = delimiter
            _compare_columns(self.zone, reference, ref_cols, zf, cols, self.columns)
            groups.setdefault((tuple(cols), delimiter), []).append(zf)
        # infer each group's types (one pass), then widen across groups so every file reads one schema
        inferred: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
        merged: dict[str, Any] = {}
        canonical: list[str] = []
        proven = True  # every group's types were found in Python, which also showed no row malformed
        paths = {group: [self._spark_path(zf) for zf in members] for group, members in groups.items()}
        for group, group_paths in paths.items():
            header, delimiter = group
            key = ("csv", _identity(groups[group]), header, delimiter)
            known = _INFERRED.get(key)
            if known is None:
                found = self._types_without_spark(groups[group], header) if delimiter == "," else None
                if found is None:
                    found = self.session.read.options(header=True, inferSchema=True, sep=delimiter) \
                        .csv(group_paths).schema
                    known = (found.jsonValue(), False)
                else:
                    known = (found.jsonValue(), True)
                _INFERRED.put(key, known)
            schema = st.StructType.fromJson(known[0])
            proven = proven and known[1]
            types = {name.lower(): f.dataType for name, f in zip(header, schema.fields)}  # by position
            inferred[group] = types
            for name in header:
                low = name.lower()
                if low not in merged:
                    canonical.append(name)
                merged[low] = _wider(merged[low], types[low]) if low in merged else types[low]
        # each value was seen to parse as its group's type; so it does as the type across groups: no bad row
        clean = proven and all(_reads_as(t, merged[name]) for types in inferred.values() for name, t in types.items())
        plain = clean or not self.check_rows  # no bad-row check: no corrupt-record or file column either
        reader = self.session.read.options(header=True, mode="PERMISSIVE")
        if not plain:
            reader = reader.options(columnNameOfCorruptRecord=CORRUPT)
        frames = []
        for (header, delimiter), group_paths in paths.items():
            fields = [st.StructField(name, merged[name.lower()]) for name in header]
            if plain:
                frames.append(reader.option("sep", delimiter).schema(st.StructType(fields)).csv(group_paths))
            else:
                schema = st.StructType(fields + [st.StructField(CORRUPT, st.StringType())])
                frames.append(_with_file(reader.option("sep", delimiter).schema(schema).csv(group_paths)))
        df = frames[0]
        for frame in frames[1:]:
            df = df.unionByName(frame, allowMissingColumns=True)
        if plain:
            # one group reads its header's columns in order already; a union holds every group's columns
            return df if len(frames) == 1 else df.selectExpr(*[quote(c) for c in canonical])
        df = df.selectExpr(*[quote(c) for c in canonical], CORRUPT, FILE)
        return self._bad_rows(df, read_from=files)

    def _types_without_spark(self, files: list[ZoneFile], header: tuple[str, ...]):
        """The group's schema as Spark would infer it, found in Python (csv_types.py), or None when unsure."""
        from pyspark.sql import types as st

        found = csv_types([zf.path for zf in files])
        if found is None or len(found) != len(header):
            return None
        if {"date", "timestamp"} & set(found):
            conf = self.session.conf
            if str(conf.get("spark.sql.legacy.timeParserPolicy", "CORRECTED")).upper() == "LEGACY":
                return None  # the legacy parsers read other forms
            ntz = "timestamp" in found and str(conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")).upper() \
                == "TIMESTAMP_NTZ"
        else:
            ntz = False
        spark_type = {"int": st.IntegerType(), "bigint": st.LongType(), "double": st.DoubleType(),
                      "date": st.DateType(), "boolean": st.BooleanType(), "string": st.StringType(),
                      "timestamp": st.TimestampNTZType() if ntz else st.TimestampType()}
        return st.StructType([st.StructField(name, spark_type[kind]) for name, kind in zip(header, found)])

    def _json(self, files: list[ZoneFile]):
        for zf in files:
            _check_text(zf, "JSON")
        documents: list[ZoneFile] = []
        lines: list[ZoneFile] = []
        for zf in files:
            (documents if is_json_document(zf.path) else lines).append(zf)
        parts = ([self._json_lines(lines)] if lines else []) + ([self._json_documents(documents)] if documents
                                                               else [])
        if len(parts) == 1:
            return parts[0]
        return parts[0].unionByName(parts[1], allowMissingColumns=True)  # a field one kind lacks reads as NULL

    def _json_documents(self, files: list[ZoneFile]):
        """Files that each hold one JSON document (an object: one row; an array of objects: a row each). Spark
        reads each file whole; one it cannot parse is malformed as a whole, and Python's parser says where."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as st

        paths = [self._spark_path(zf) for zf in files]
        reader = self.session.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT, multiLine=True)
        key = ("json-document", _identity(files))
        known = _INFERRED.get(key)
        if known is not None:
            df = reader.schema(st.StructType.fromJson(known)).json(paths)
        else:
            df = reader.json(paths)
            _INFERRED.put(key, df.schema.jsonValue())
        if CORRUPT not in df.columns:
            return df
        clean = ("json-document", _identity(files), df.schema.json())
        if not self.check_rows or _CLEAN.get(clean):
            return df.drop(CORRUPT)
        if len(df.columns) == 1:
            # no document gave a field: Spark refuses a query over the corrupt column alone, and every file with
            # something in it is broken
            errors = {zf.name: json_error_line(zf.path) for zf in files}
            broken = [zf for zf in files if errors[zf.name][0] is not None] or files
        else:
            data = quote(next(c for c in df.columns if c != CORRUPT))  # (Spark refuses the corrupt column alone)
            uris = {r.path for r in df.where(F.col(CORRUPT).isNotNull())
                    .select(F.col("_metadata.file_path").alias("path"), F.col(data)).collect()}
            broken = [zf for zf in map(self._origin, uris) if zf is not None]
            errors = {zf.name: json_error_line(zf.path) for zf in broken}
        if not broken:
            _CLEAN.put(clean, True)
            return df.drop(CORRUPT)
        samples = []
        for zf in sorted(broken, key=lambda zf: zf.name):
            line, text = errors[zf.name]
            samples.append((zf, BadRow(zf.name, line, text[:200])))
        first_file, first = samples[0]
        if self.bad_rows != "skip" or len(df.columns) == 1:
            raise RatuiError(
                "RAT-LND-007",
                f"{len(samples)} landing file(s) in zone '{self.zone}' are not valid JSON documents "
                f"({', '.join(zf.name for zf, _ in samples)})"
                + (f"; first at line {first.line}: {first.text[:120]!r}" if first.line else ""),
                file=first_file.where, line=first.line,
                details={"bad_rows": len(samples), "samples": [b.__dict__ for _, b in samples]},
                hint="Fix the file where shown. A .json file whose first line is `{` or `[` alone (or an unfinished "
                     "array) is read as one document, an object or an array of objects; any other as JSON lines, "
                     "one object per line." + ("" if self.bad_rows == "skip" else
                                               " `landing: {bad_rows: skip}` leaves such a file out."))
        self.report.bad_rows += len(samples)
        self.report.samples.extend(b for _, b in samples)
        where = ", ".join(f"{b.file}:{b.line}" if b.line else b.file for _, b in samples)
        self.report.notes.append(f"RAT-LND-007 {len(samples)} malformed JSON document(s) in zone '{self.zone}' left "
                                 f"out (landing.bad_rows: skip): {where}")
        return df.where(F.col(CORRUPT).isNull()).drop(CORRUPT)

    def _json_lines(self, files: list[ZoneFile]):
        from pyspark.sql import types as st

        paths = [self._spark_path(zf) for zf in files]
        reader = self.session.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
        key = ("json", _identity(files))
        known = _INFERRED.get(key)
        if known is not None:  # the same bytes as when inferred: the same schema (and the same corrupt column)
            df = reader.schema(st.StructType.fromJson(known)).json(paths)
        else:
            df = reader.json(paths)
            _INFERRED.put(key, df.schema.jsonValue())
        if CORRUPT not in df.columns:
            return df  # Spark's schema inference saw every line parse: nothing to check
        if len(df.columns) == 1:
            # not one line parsed, so the file has no columns at all: the lines themselves are the report
            from pyspark.sql import functions as F

            lines = self.session.read.text(paths).where(F.trim("value") != "")
            df = lines.select(F.col("value").alias(CORRUPT), F.lit(1).alias("__ratui_line"),
                              F.col("_metadata.file_path").alias(FILE))
            return self._bad_rows(df, only_bad=True)
        return self._bad_rows(_with_file(df), read_from=files)

    def _parquet(self, files: list[ZoneFile]):
        reference, ref_schema = files[0], parquet_schema(files[0])
        types: dict[str, tuple[Any, ZoneFile]] = {}
        for zf in files:
            schema = parquet_schema(zf)
            _compare_columns(self.zone, reference, ref_schema.names, zf, schema.names, self.columns)
            for f in schema:
                seen = types.get(f.name.lower())
                if seen is None:
                    types[f.name.lower()] = (f.type, zf)
                elif seen[0] != f.type:
                    raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' in zone '{self.zone}' has column "
                                     f"'{f.name}' as {f.type}, but '{seen[1].name}' has it as {seen[0]}",
                                     file=zf.where,
                                     hint="Write every file of a zone with the same column types.")
        from pyspark.sql import types as st

        # Spark infers a Parquet schema with a job of its own (even for one file): the same files give the same
        # schema, remembered as for CSV and JSON
        reader = self.session.read.option("mergeSchema", self.columns == "union")
        key = ("parquet", _identity(files), self.columns)
        known = _INFERRED.get(key)
        if known is not None:
            reader = reader.schema(st.StructType.fromJson(known))
        df = reader.parquet(*[self._spark_path(zf) for zf in files])
        if known is None:
            _INFERRED.put(key, df.schema.jsonValue())
        return df

    # ----------------------------------------------------------------------------------------- bad rows

    def _bad_rows(self, df, only_bad: bool = False, read_from: list[ZoneFile] | None = None):
        """Count the rows Spark could not parse (one job); fail on them, or leave them out and report them.
        `read_from`: the files df reads, when a clean result may be remembered for them."""
        from pyspark.sql import functions as F

        if not self.check_rows:
            return df.drop(CORRUPT, FILE)
        key = (self.fmt, _identity(read_from), df.schema.json()) if read_from else None
        if key is not None and _CLEAN.get(key):
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
                _CLEAN.put(key, True)
            return df.drop(CORRUPT, FILE)
        total = sum(r.n for r in rows)
        samples: list[BadRow] = []
        first_file: ZoneFile | None = None
        for r in sorted(rows, key=lambda r: self._name_of(r.path)):
            zf = self._origin(r.path)
            if zf is None:
                continue
            first_file = first_file or zf
            lines = _find_lines(zf.path, list(r.first), header=self.fmt == "csv")
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


def _find_lines(path: Path, records: Iterable[str], header: bool = False) -> list[int | None]:
    """The 1-based line number of each bad record's text in the file (the first unclaimed match). `header`: line 1
    is the file's header, never a row (a row repeating it is found further down)."""
    wanted = [r.rstrip("\r\n") for r in records]
    found: list[int | None] = [None] * len(wanted)
    pending = {i for i in range(len(wanted))}
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
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
    return found
