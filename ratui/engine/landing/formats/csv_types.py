"""The column types Spark's CSV inference gives a small, plain set of CSV files, found without a Spark job.

Spark infers a CSV file set's column types with two jobs of its own (its first line, then every row), and then
ratui reads the files once more to find malformed rows. In a JVM that has just started these are the slowest part
of a pipeline's first read (benchmarks/README.md). For the files most landing zones hold the answer is certain
without Spark, and then it also proves that no row is malformed: this module gives it when it is certain, and None
when it is not, and then Spark infers and checks as before.

Certain means: the files are small, UTF-8 without a byte-order mark, with no quote, backslash, carriage return or
NUL byte anywhere; each file's first line is the same header and no other line repeats it; every other line is
empty or has exactly the header's number of fields; and each column's non-empty values are all of one kind, or
numbers of several widths, or hold at least one text value:

    [+-]digits within 32 bits                              int     (with wider numbers: bigint, double)
    [+-]digits within 64 bits                              bigint
    [+-]digits.digits                                      double
    yyyy-MM-dd, a real day (years 1000-9999)               date
    yyyy-MM-dd HH:mm:ss[.ffffff] ('T' or ' '), a real time  timestamp (Spark's spark.sql.timestampType)
    true / false in any case                               boolean
    text: starts with a letter and is none of the words    string, whatever else the column holds
    Spark reads as a number, a time or a boolean
    (NaN, Inf..., T12:00, true, false)

A column that is empty in every row is a string, as in Spark. Anything else (dates mixed with timestamps or with
numbers, a 20-digit number, a value with spaces around it, `1e5`, a quoted field, a short row ...) is left to Spark:
for such mixes its answer can depend on the order of the rows and on how the files split into tasks.
tests/engine/run/test_csv_types.py checks every certain answer against Spark's own inference and read.
"""

from __future__ import annotations

import datetime
import operator
import re
from pathlib import Path
from typing import Protocol, Sequence, Union


class Readable(Protocol):
    """A landing file (reader.py ZoneFile: a local file or an object, its size known without reading it)."""

    @property
    def size(self) -> int: ...

    def read_bytes(self) -> bytes: ...

# Python takes about 40 ms a MB on a 2-core machine, Spark's warm inference and bad-row check 0.3-0.45 s at 0.5-8 MB
# (benchmarks/csv_types.py); the limit is for memory: every value of the read is held at once, about 23 times the
# files' bytes (96 MB at 4 MB)
MAX_BYTES = 4 << 20
MAX_COLUMNS = 1000

INT, BIGINT, DOUBLE, DATE, TIMESTAMP, BOOLEAN, STRING = "int", "bigint", "double", "date", "timestamp", "boolean", \
    "string"

# each pattern matches a whole column: its values joined by "\n", with a "\n" after the last one; empty values pass
_TEXT = re.compile(r"(?m)^(?![Tt](?:[0-9]|\n))(?!(?i:true|false)\n)(?!(?i:nan|inf))[A-Za-z]")
_INTEGERS = re.compile(r"(?:(?:[+-]?[0-9]+)?\n)*")
_NUMBERS = re.compile(r"(?:(?:[+-]?[0-9]{1,18}(?:\.[0-9]+)?)?\n)*")
_DAY = r"[1-9][0-9]{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"  # years 1000-9999; each month's last day
_DATES = re.compile(r"(?:(?:%s)?\n)*" % _DAY)  # is checked on the distinct values
_TIMESTAMPS = re.compile(r"(?:(?:%s[ T](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?)?\n)*" % _DAY)
_BLANK_LINE = re.compile(r"(?m)^(?:[^\S\n]|[\x00-\x09\x0b-\x1f])+$")
_BOOLEANS = re.compile(r"(?:(?i:true|false)?\n)*")
_COMMAS = operator.methodcaller("count", ",")

_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_BIGINT_RANGE = (-(1 << 63), (1 << 63) - 1)


def csv_types(files: Sequence[Union[Path, Readable]]) -> list[str] | None:
    """Spark's inferred type of each header column (header=True, inferSchema=True, Spark's defaults otherwise),
    or None when this module cannot be certain of it. Timestamps are TIMESTAMP: the caller maps them to the
    session's spark.sql.timestampType. `files`: paths, or landing files (an object is read only when the files'
    listed sizes are within MAX_BYTES)."""
    try:
        if sum(f.stat().st_size if isinstance(f, Path) else f.size for f in files) > MAX_BYTES:
            return None
    except OSError:
        return None
    header: str | None = None
    width = 0
    fields: list[str] = []  # every row's fields, one row after another
    total = 0
    for item in files:
        try:
            data = item.read_bytes()
        except OSError:
            return None
        total += len(data)
        if total > MAX_BYTES or data.startswith(b"\xef\xbb\xbf"):
            return None
        if any(b in data for b in (b'"', b"\\", b"\r", b"\x00")):
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        first, _, rest = text.partition("\n")
        if header is None:
            header, width = first, first.count(",") + 1
            if _blank(first) or width > MAX_COLUMNS:
                return None
        if first != header:
            return None
        # a blank line: Spark leaves out what Java's trim() makes empty (with more than one column, a blank line
        # has the wrong number of commas); a line repeating the header: Spark's inference leaves it out, its read
        # does not; an empty line: Spark leaves it out
        if width == 1 and _BLANK_LINE.search(rest):
            return None
        lines = list(filter(None, rest.split("\n")))
        if header in lines or set(map(_COMMAS, lines)) - {width - 1}:
            return None
        if lines:
            fields.extend(",".join(lines).split(","))
    if header is None:
        return None
    types: list[str] = []
    for i in range(width):
        kind = column_type(fields[i::width])
        if kind is None:
            return None
        types.append(kind)
    return types


def column_type(values: list[str]) -> str | None:
    """The type Spark infers for one column's values (empty ones are NULL), or None when not certain."""
    if not any(values):
        return STRING
    joined = "\n".join(values) + "\n"
    # each whole-column pattern below stops at the first value it does not fit, and none fits a text value
    if _INTEGERS.fullmatch(joined):
        widest = INT
        for value in values if max(map(len, values)) >= 10 else ():  # 9 digits and a sign always fit 32 bits
            if len(value) >= 10:
                number = int(value)
                if not _BIGINT_RANGE[0] <= number <= _BIGINT_RANGE[1]:
                    return None  # Spark's decimal inference: left to Spark
                if not _INT_RANGE[0] <= number <= _INT_RANGE[1]:
                    widest = BIGINT
        return widest
    if _NUMBERS.fullmatch(joined):
        return DOUBLE  # at least one value has a fraction (else the integers matched)
    if _DATES.fullmatch(joined):
        return DATE if all(_real_day(v) for v in set(values) if v) else None
    if _TIMESTAMPS.fullmatch(joined):
        return TIMESTAMP if all(_real_day(v) for v in {v[:10] for v in values if v}) else None
    if _BOOLEANS.fullmatch(joined):
        return BOOLEAN
    if _TEXT.search(joined):
        return STRING
    return None


def _blank(line: str) -> bool:
    """Blank to Python or to Java's String.trim (which drops every character up to the space)."""
    return not line.strip() or max(line) <= " "


def _real_day(value: str) -> bool:
    """A yyyy-MM-dd the day pattern let through is a real day (not 2025-02-30)."""
    try:
        datetime.date(int(value[:4]), int(value[5:7]), int(value[8:10]))
    except ValueError:
        return False
    return True
