"""The landing file formats, declared once: a format's name, the file suffixes that are it, and its module.

A format module has `read(reader, files)`, which returns a DataFrame over the files (landing/reader.py's
ZoneReader does what every format shares: empty files, safe paths, the bad-row check). A new format is one module
beside these and one line in FORMATS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable

from ratui.engine.errors import RatuiError


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]
    module: str


FORMATS = {
    "csv": Format("csv", (".csv",), "ratui.engine.landing.formats.csv"),
    "json": Format("json", (".json", ".jsonl", ".ndjson"), "ratui.engine.landing.formats.json"),
    "parquet": Format("parquet", (".parquet",), "ratui.engine.landing.formats.parquet"),
}
BY_SUFFIX = {suffix: f.name for f in FORMATS.values() for suffix in f.suffixes}


def format_module(name: str) -> ModuleType:
    return importlib.import_module(FORMATS[name].module)


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
