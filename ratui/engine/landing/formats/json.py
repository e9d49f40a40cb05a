"""JSON landing files: JSON lines (an object per line), or one document per file (an object, or an array of objects).

A file whose first line is `{` or `[` alone (or starts an array it does not finish) is a document; Spark reads it
whole, and one it cannot parse is malformed as a whole (Python's parser says where). Any other file is JSON lines.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile, prefetch_heads
from ratui.engine.landing.read_checks import CLEAN, INFERRED, PREFIX_BYTES, check_text, file_set
from ratui.engine.landing.read_contract import CORRUPT, FILE, BadRow, Format, ZoneReading, with_file
from ratui.engine.sql_text import quote

JSON_PREFIX = 1 << 20  # bytes of a JSON lines file whose lines name the zone's columns (column lineage)


def _landing_file(file: Path | ZoneFile) -> ZoneFile:
    return file if isinstance(file, ZoneFile) else ZoneFile(file, file.name)


def _opened(zf: ZoneFile) -> IO[bytes]:
    """A local file, or an object's first bytes (what the checks already fetched): enough to find its first line."""
    if zf.path is not None:
        return open(zf.path, "rb")
    return io.BytesIO(zf.head(PREFIX_BYTES))


def is_json_document(file: Path | ZoneFile) -> bool:
    """Whether a JSON landing file holds one document rather than JSON lines: its first non-blank line is `{` or
    `[` alone, or starts an array it does not finish (a pretty-printed object or array). A first line that is a
    whole value, even an array, is JSON lines (Spark reads a line holding an array as a row per element)."""
    import json

    with _opened(_landing_file(file)) as handle:
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


def json_error_line(file: Path | ZoneFile, limit: int = 32 << 20) -> tuple[int | None, str]:
    """Where Python's JSON parser finds a document broken: (line, that line's text); (None, the first line) when
    it parses it (Spark refused it for another reason) or the file is over `limit` bytes."""
    import json

    zf = _landing_file(file)
    if zf.size > limit:
        return None, ""
    text = zf.read_bytes().decode("utf-8-sig", errors="replace")
    lines = text.splitlines()
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno, lines[exc.lineno - 1].strip() if 0 < exc.lineno <= len(lines) else ""
    return None, lines[0].strip() if lines else ""


def read(zr: ZoneReading, files: list[ZoneFile]):
    prefetch_heads(files, PREFIX_BYTES)  # objects read in place: their first bytes, several at a time
    for zf in files:
        check_text(zf, "JSON")
    documents: list[ZoneFile] = []
    lines: list[ZoneFile] = []
    for zf in files:
        (documents if is_json_document(zf) else lines).append(zf)
    parts = ([_lines(zr, lines)] if lines else []) + ([_documents(zr, documents)] if documents
                                                           else [])
    if len(parts) == 1:
        return parts[0]
    return parts[0].unionByName(parts[1], allowMissingColumns=True)  # a field one kind lacks reads as NULL


def _documents(zr: ZoneReading, files: list[ZoneFile]):
    """Files that each hold one JSON document (an object: one row; an array of objects: a row each). Spark
    reads each file whole; one it cannot parse is malformed as a whole, and Python's parser says where."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    paths = [zr.spark_path(zf) for zf in files]
    reader = zr.session.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT, multiLine=True)
    key = ("json-document", file_set(files))
    known = INFERRED.get(key)
    if known is not None:
        df = reader.schema(st.StructType.fromJson(known)).json(paths)
    else:
        df = reader.json(paths)
        INFERRED.put(key, df.schema.jsonValue())
    if CORRUPT not in df.columns:
        return df
    clean = ("json-document", file_set(files), df.schema.json())
    if not zr.check_rows or CLEAN.get(clean):
        return df.drop(CORRUPT)
    if len(df.columns) == 1:
        # no document gave a field: Spark refuses a query over the corrupt column alone, and every file with
        # something in it is broken
        errors = {zf.name: json_error_line(zf) for zf in files}
        broken = [zf for zf in files if errors[zf.name][0] is not None] or files
    else:
        data = quote(next(c for c in df.columns if c != CORRUPT))  # (Spark refuses the corrupt column alone)
        uris = {r.path for r in df.where(F.col(CORRUPT).isNotNull())
                .select(F.col("_metadata.file_path").alias("path"), F.col(data)).collect()}
        broken = [zf for zf in map(zr.origin, uris) if zf is not None]
        errors = {zf.name: json_error_line(zf) for zf in broken}
    if not broken:
        CLEAN.put(clean, True)
        return df.drop(CORRUPT)
    samples = []
    for zf in sorted(broken, key=lambda zf: zf.name):
        line, text = errors[zf.name]
        samples.append((zf, BadRow(zf.name, line, text[:200])))
    first_file, first = samples[0]
    if zr.bad_rows != "skip" or len(df.columns) == 1:
        raise RatuiError(
            "RAT-LND-007",
            f"{len(samples)} landing file(s) in zone '{zr.zone}' are not valid JSON documents "
            f"({', '.join(zf.name for zf, _ in samples)})"
            + (f"; first at line {first.line}: {first.text[:120]!r}" if first.line else ""),
            file=first_file.where, line=first.line,
            details={"bad_rows": len(samples), "samples": [b.__dict__ for _, b in samples]},
            hint="Fix the file where shown. A .json file whose first line is `{` or `[` alone (or an unfinished "
                 "array) is read as one document, an object or an array of objects; any other as JSON lines, "
                 "one object per line." + ("" if zr.bad_rows == "skip" else
                                           " `landing: {bad_rows: skip}` leaves such a file out."))
    zr.report.bad_rows += len(samples)
    zr.report.samples.extend(b for _, b in samples)
    where = ", ".join(f"{b.file}:{b.line}" if b.line else b.file for _, b in samples)
    zr.report.notes.append(f"RAT-LND-007 {len(samples)} malformed JSON document(s) in zone '{zr.zone}' left "
                             f"out (landing.bad_rows: skip): {where}")
    return df.where(F.col(CORRUPT).isNull()).drop(CORRUPT)


def _lines(zr: ZoneReading, files: list[ZoneFile]):
    from pyspark.sql import types as st

    paths = [zr.spark_path(zf) for zf in files]
    reader = zr.session.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
    key = ("json", file_set(files))
    known = INFERRED.get(key)
    if known is not None:  # the same bytes as when inferred: the same schema (and the same corrupt column)
        df = reader.schema(st.StructType.fromJson(known)).json(paths)
    else:
        df = reader.json(paths)
        INFERRED.put(key, df.schema.jsonValue())
    if CORRUPT not in df.columns:
        return df  # Spark's schema inference saw every line parse: nothing to check
    if len(df.columns) == 1:
        # not one line parsed, so the file has no columns at all: the lines themselves are the report
        from pyspark.sql import functions as F

        lines = zr.session.read.text(paths).where(F.trim("value") != "")
        df = lines.select(F.col("value").alias(CORRUPT), F.lit(1).alias("__ratui_line"),
                          F.col("_metadata.file_path").alias(FILE))
        return zr.bad_rows_of(df, only_bad=True)
    return zr.bad_rows_of(with_file(df), read_from=files)


def columns(zf: ZoneFile) -> list[str]:
    """The columns a JSON file names: the keys of its first lines' objects (JSON_PREFIX bytes), or of its document's
    objects (a document of at most 8 JSON_PREFIX); none when they do not parse."""
    import json

    data = zf.head(JSON_PREFIX)
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    rows: list[Any]
    if is_json_document(zf):
        if zf.size > 8 * JSON_PREFIX:
            return []
        text = zf.read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff")
        try:
            document = json.loads(text)
        except ValueError:
            return []
        rows = document if isinstance(document, list) else [document]
    else:
        lines = text.splitlines()
        if len(data) >= JSON_PREFIX and lines:
            lines = lines[:-1]  # the last line read may be cut short
        rows = []
        for line in io.StringIO("\n".join(lines)):
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    names: list[str] = []
    for row in rows:
        if isinstance(row, dict):
            names.extend(k for k in row if k not in names)
    return names


# Spark orders the columns it infers from JSON by name: so does a zone's column lineage
FORMAT = Format("json", (".json", ".jsonl", ".ndjson"), read=read, columns=columns, columns_by_name=True)
