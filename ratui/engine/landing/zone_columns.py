"""A landing zone's columns, from its files' first bytes (never its rows): the start of every column path in
column lineage (project/column_lineage.py). Which columns a file names is its format's (formats/: FORMAT.columns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile
from ratui.engine.landing.formats import FORMATS, zone_format
from ratui.engine.landing.zone import ZoneEntry, open_zone

ZONE_FILES_READ = 50  # a zone's columns are read from at most this many of its files (their first bytes)

# (columns, or None with the reason they are unknown)
Columns = tuple[list[str] | None, str]


def read_zone_columns(settings: Any, namespace: str, zone: str) -> Columns:
    """A landing zone's columns from its files' first bytes: the active files, or when none is left (a new_files
    zone whose files were all loaded and archived) the archived ones. A CSV file's header, a Parquet footer, the
    keys of a JSON file's first lines (Spark orders inferred JSON columns by name)."""
    try:
        opened = open_zone(settings, namespace, zone)
        entries = opened.list()
        if not entries:
            entries = [e for e in opened.processed() if e.name.count("/") == 2]
            entries.sort(key=lambda e: e.name, reverse=True)  # the newest run's archive first
        if not entries:
            return None, f"landing zone '{zone}' has no files to read its columns from"
        entries = entries[:ZONE_FILES_READ]
        fmt = FORMATS[zone_format(zone, [e.name for e in entries], opened.url)]
        names: list[str] = []
        for zf in (_zone_file(opened, e) for e in entries):
            if zf.size == 0:
                continue
            for name in fmt.columns(zf):
                if name.lower() not in names:
                    names.append(name.lower())
        if fmt.columns_by_name:
            names.sort()
        if not names:
            return None, f"the files of landing zone '{zone}' name no columns"
        return names, ""
    except RatuiError as exc:
        return None, f"the columns of landing zone '{zone}' cannot be read: {exc.code} {exc.message}"
    except OSError as exc:
        return None, f"the columns of landing zone '{zone}' cannot be read: {exc}"


def _zone_file(zone: Any, entry: ZoneEntry) -> ZoneFile:
    path = entry.path
    if path is not None:
        return ZoneFile(Path(path), entry.name)
    from ratui.engine.landing.s3 import S3Object  # an object: its first bytes and footer by ranged reads

    return ZoneFile(None, entry.name, source=S3Object(zone, entry))
