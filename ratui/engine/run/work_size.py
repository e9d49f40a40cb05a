"""How much data the runs of an invocation read at most, known before any of them starts (no Spark, no catalog):
what a process that runs them and exits needs to choose its JVM's compiler (spark/jit.py)."""

from __future__ import annotations

import os
from pathlib import Path

from ratui.engine.project.compiler import CompiledProject
from ratui.engine.errors import RatuiError
from ratui.engine.landing.zone import open_zone
from ratui.engine.project.discovery import table_folder


def input_bytes(compiled: CompiledProject, keys: list[str], limit: int | None = None) -> int | None:
    """The bytes of every file in the landing zones the pipelines read and in the data folders of the tables they
    and their quality tests read and write. Files of older snapshots and archived landing files count too, so the
    figure errs on the big side. None when a size cannot be known here (a zone in object storage). Counting stops
    once past `limit`."""
    settings = compiled.settings
    root = settings.root
    folders: set[Path] = set()
    for key in keys:
        pipeline = compiled.pipelines.get(key)
        if pipeline is None:
            continue
        for table in (key, *pipeline.refs, *(ref for ref, _file, _line in pipeline.test_refs)):
            if table.count(".") == 2:
                folders.add(table_folder(root, table) / "data")
        for name in pipeline.zones:
            try:
                zone = open_zone(settings, pipeline.namespace, name)
            except RatuiError:
                continue  # not there: nothing to read
            if zone.polled:
                return None  # its files are not on this disk
            folders.add(Path(zone.url))
    total = 0
    for folder in sorted(folders):
        total += _folder_bytes(folder, None if limit is None else limit - total)
        if limit is not None and total > limit:
            break
    return total


def tables_bytes(root: Path, limit: int | None = None) -> int:
    """The bytes of every table's data folder in the project (every namespace's warehouse/LAYER/NAME/data): what a
    query over any of them reads at most. Counting stops once past `limit`."""
    total = 0
    for data in sorted(root.glob("*/warehouse/*/*/data")):
        total += _folder_bytes(data, None if limit is None else limit - total)
        if limit is not None and total > limit:
            break
    return total


def _folder_bytes(folder: Path, limit: int | None) -> int:
    """The size of the files under a folder (a symlinked file counts as what it points to; symlinked folders are
    not followed; files that vanish while counted are skipped)."""
    total = 0
    for here, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(here, name)).st_size
            except OSError:
                continue
            if limit is not None and total > limit:
                return total
    return total
