"""The landing file formats, declared once: FORMATS lists each format module's FORMAT (read_contract.Format: its
name, its file suffixes, how its files are read, which columns a file names).

A format module has everything ratui does with its files: `read(reading, files)` returns a DataFrame over them
(landing/reader.py's ZoneReader does what every format shares: empty files, safe paths, the bad-row check) and
`columns(file)` the columns one file names (a zone's column lineage, landing/zone_columns.py). It imports
read_contract.py and read_checks.py, never the reader. A new format is one module beside these, declaring FORMAT,
and its line in FORMATS (tests/engine/test_declared_lists.py fails until it is there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from ratui.engine.errors import RatuiError
from ratui.engine.landing.formats import csv, json, parquet
from ratui.engine.landing.read_contract import Format

FORMATS: dict[str, Format] = {f.name: f for f in (csv.FORMAT, json.FORMAT, parquet.FORMAT)}
BY_SUFFIX = {suffix: f.name for f in FORMATS.values() for suffix in f.suffixes}


def zone_format(zone: str, names: Iterable[str], where: str, place: Callable[[str], str] | None = None) -> str:
    """The one format of a zone's files (by suffix): RAT-LND-004 for a file of no known format (named by
    `place(name)`, default the name), RAT-LND-003 for a zone that mixes formats (named by `where`)."""
    formats = set()
    for name in names:
        fmt = BY_SUFFIX.get(Path(name).suffix.lower())
        if fmt is None:
            raise RatuiError("RAT-LND-004", f"landing file '{Path(name).name}' in zone '{zone}' has an unsupported "
                             "format", file=place(name) if place else name)
        formats.add(fmt)
    if len(formats) > 1:
        raise RatuiError("RAT-LND-003", f"landing zone '{zone}' mixes {', '.join(sorted(formats))} files", file=where)
    return formats.pop()
