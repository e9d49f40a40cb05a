"""Helpers shared by engine tests: run one pipeline, and a fingerprint of every table on main."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ratui.engine.facade.engine import Engine
from ratui.engine.run.results import RunResult


def run_one(engine: Engine, key: str, **kwargs) -> RunResult:
    return engine.run([key], **kwargs)[0]


def main_fingerprint(root: Path) -> dict[str, tuple[int, str]]:
    """{table: (rows, sha256 of its rows in sorted order)} for every table on main, read with PyIceberg."""
    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.catalog.config import catalog_config, open_catalog

    settings = load_settings(Path(root))
    # the project's own catalog and storage (an s3:// warehouse's tables are read through its settings)
    catalog = open_catalog(catalog_config(settings.catalog or None), settings.db_path, settings.root)
    out = {}
    for key in sorted(catalog.table_pointers("main")):
        table = catalog.load_table("main", key).scan().to_arrow()
        rows = sorted(repr(row) for row in zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
        out[key] = (table.num_rows, hashlib.sha256("\n".join(rows).encode()).hexdigest())
    return out
