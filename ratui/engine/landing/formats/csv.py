"""CSV landing files: delimiter and header from the first bytes, header groups, types found in Python when they can be.

Spark applies one schema to a folder of CSV files by position, so files are grouped by header (and delimiter);
each group is read with the zone's schema in that group's own column order, and the groups are united by name.
For small plain files csv_types.py finds Spark's types in Python, which also shows that no row is malformed: then
neither Spark pass (inference, the bad-row check) runs.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile, prefetch_heads
from ratui.engine.landing.formats.csv_types import csv_types
from ratui.engine.landing.read_checks import INFERRED, PREFIX_BYTES, check_text, compare_columns, file_set
from ratui.engine.landing.read_contract import CORRUPT, FILE, Format, ZoneReading, with_file
from ratui.engine.sql_text import quote

DELIMITERS = (";", "\t", "|")  # besides the comma: what spreadsheets and databases export with
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}


def csv_layout(zf: ZoneFile) -> tuple[str, list[str]]:
    """A CSV file's delimiter (_delimiter) and header (csv_header), from one read of its first bytes."""
    text = _csv_text(zf)
    delimiter = _delimiter(text)
    return delimiter, csv_header(zf, delimiter, text)


def _csv_text(zf: ZoneFile) -> str:
    """A CSV file's first bytes, checked (_check_text) and decoded, without a byte-order mark."""
    return check_text(zf, "CSV").decode("utf-8", errors="ignore").lstrip("\ufeff")


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


def read(zr: ZoneReading, files: list[ZoneFile]):
    from pyspark.sql import types as st

    # files with the same header and delimiter read together: a group
    groups: dict[tuple[tuple[str, ...], str], list[ZoneFile]] = {}
    prefetch_heads(files, PREFIX_BYTES)  # objects read in place: their first bytes, several at a time
    layouts = {zf.name: csv_layout(zf) for zf in files}
    reference, ref_cols = files[0], layouts[files[0].name][1]  # the zone's columns: its first file's
    for zf in files:
        delimiter, cols = layouts[zf.name]
        if delimiter != ",":
            zr.report.delimiters[zf.name] = delimiter
        compare_columns(zr.zone, reference, ref_cols, zf, cols, zr.columns)
        groups.setdefault((tuple(cols), delimiter), []).append(zf)
    # infer each group's types (one pass), then widen across groups so every file reads one schema
    inferred: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
    merged: dict[str, Any] = {}
    canonical: list[str] = []
    proven = True  # every group's types were found in Python, which also showed no row malformed
    paths = {group: [zr.spark_path(zf) for zf in members] for group, members in groups.items()}
    for group, group_paths in paths.items():
        header, delimiter = group
        key = ("csv", file_set(groups[group]), header, delimiter)
        known = INFERRED.get(key)
        if known is None:
            found = _types_without_spark(zr, groups[group], header) if delimiter == "," else None
            if found is None:
                found = zr.session.read.options(header=True, inferSchema=True, sep=delimiter) \
                    .csv(group_paths).schema
                known = (found.jsonValue(), False)
            else:
                known = (found.jsonValue(), True)
            INFERRED.put(key, known)
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
    plain = clean or not zr.check_rows  # no bad-row check: no corrupt-record or file column either
    reader = zr.session.read.options(header=True, mode="PERMISSIVE")
    if not plain:
        reader = reader.options(columnNameOfCorruptRecord=CORRUPT)
    frames = []
    for (header, delimiter), group_paths in paths.items():
        fields = [st.StructField(name, merged[name.lower()]) for name in header]
        if plain:
            frames.append(reader.option("sep", delimiter).schema(st.StructType(fields)).csv(group_paths))
        else:
            schema = st.StructType(fields + [st.StructField(CORRUPT, st.StringType())])
            frames.append(with_file(reader.option("sep", delimiter).schema(schema).csv(group_paths)))
    df = frames[0]
    for frame in frames[1:]:
        df = df.unionByName(frame, allowMissingColumns=True)
    if plain:
        # one group reads its header's columns in order already; a union holds every group's columns
        return df if len(frames) == 1 else df.selectExpr(*[quote(c) for c in canonical])
    df = df.selectExpr(*[quote(c) for c in canonical], CORRUPT, FILE)
    return zr.bad_rows_of(df, read_from=files)


def _types_without_spark(zr: ZoneReading, files: list[ZoneFile], header: tuple[str, ...]):
    """The group's schema as Spark would infer it, found in Python (csv_types.py), or None when unsure."""
    from pyspark.sql import types as st

    found = csv_types(files)
    if found is None or len(found) != len(header):
        return None
    if {"date", "timestamp"} & set(found):
        conf = zr.session.conf
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


def columns(zf: ZoneFile) -> list[str]:
    """The columns a CSV file names: its header."""
    return csv_layout(zf)[1]


FORMAT = Format("csv", (".csv",), read=read, columns=columns)
