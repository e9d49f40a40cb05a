"""The cheap checks of a landing file before Spark reads it, shared by the formats (formats/): text that is UTF-8
without NUL bytes, the same columns as the zone's first file; and what a pass over a set of files found, remembered
for the next read of the same files (INFERRED, CLEAN)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile

PREFIX_BYTES = 1 << 20  # how much of a text file is checked for binary data and UTF-8


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


INFERRED = _Memo()  # (format, files[, header]) -> the schema inferred, as JSON (CSV: with "no row malformed")
CLEAN = _Memo()  # (format, files, schema JSON) -> True: a bad-row check over exactly these found none


def file_set(files: list[ZoneFile]) -> tuple:
    """What makes a pass over these files give the same answer: each file's identity (a local file's path, size,
    mtime and inode; an object's URI, size, ETag and version as listed)."""
    return tuple(zf.identity for zf in files)


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


def check_text(zf: ZoneFile, kind: str) -> bytes:
    """A text file's first bytes, refused when they hold NUL bytes or are not UTF-8 (RAT-LND-008 at the line)."""
    data = zf.head(PREFIX_BYTES)
    problem = _first_bad_byte_line(data)
    if problem:
        what, line = problem
        raise RatuiError("RAT-LND-008", f"landing file '{zf.name}' is not a {kind} file: {what} at line {line}",
                         file=zf.where, line=line)
    return data


def compare_columns(zone: str, reference: ZoneFile, ref_cols: list[str], zf: ZoneFile, cols: list[str],
                    mode: str) -> None:
    """A file whose columns differ from the zone's (its first file's) is an error, unless `columns: union`."""
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
