"""Helpers shared by engine tests: run one pipeline, and a fingerprint of every table on main."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ratui.engine.run.engine import Engine
from ratui.engine.run.results import RunResult


def run_one(engine: Engine, key: str, **kwargs) -> RunResult:
    return engine.run([key], **kwargs)[0]


def main_fingerprint(root: Path) -> dict[str, tuple[int, str]]:
    """{table: (rows, sha256 of its rows in sorted order)} for every table on main, read with PyIceberg."""
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    catalog = SqliteBranchCatalog(Path(root) / ".ratui" / "ratui.db", Path(root))
    out = {}
    for key in sorted(catalog.table_pointers("main")):
        table = catalog.load_table("main", key).scan().to_arrow()
        rows = sorted(repr(row) for row in zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
        out[key] = (table.num_rows, hashlib.sha256("\n".join(rows).encode()).hexdigest())
    return out
