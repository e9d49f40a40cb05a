"""The edges of write-audit-publish: moved projects, paths outside the project, landing files that lie,
full refreshes after bookkeeping, and errors that point at the line (real Spark, Iceberg and SQLite)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.runner import Engine

from mainstate import main_fingerprint, run_one


def tree_state(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under `folder` with its mtime and content hash: proof that nothing there was touched."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


# ------------------------------------------------------------------------------------------------ relocation

INCREMENTAL = """\
-- @merge_strategy: incremental
-- @unique_key: id
SELECT * FROM {{ landing_zone('items') }}
"""


def test_a_copied_project_works_on_its_own_files(make_project, spark, tmp_path):
    root = make_project({
        "demo/pipelines/bronze/items/pipeline.sql": INCREMENTAL,
        "demo/landing/items/a.csv": "id,name\n1,a\n2,b\n",
    })
    assert run_one(Engine(root), "demo.bronze.items").status == "success"
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    original = tree_state(root / "demo" / "warehouse")
    before = main_fingerprint(copy)

    (copy / "demo/landing/items/b.csv").write_text("id,name\n2,B\n3,c\n")
    result = run_one(Engine(copy), "demo.bronze.items")
    assert result.status == "success", result.error
    assert tree_state(root / "demo" / "warehouse") == original  # the original was not read into or written
    after = main_fingerprint(copy)
    assert after["demo.bronze.items"][0] == 3 and before["demo.bronze.items"][0] == 2
    assert main_fingerprint(root)["demo.bronze.items"][0] == 2

    # the original gone: the copy still reads every table and its history of files
    shutil.rmtree(root)
    assert main_fingerprint(copy) == after
    (copy / "demo/landing/items/c.csv").write_text("id,name\n4,d\n")
    assert run_one(Engine(copy), "demo.bronze.items").status == "success"
    assert main_fingerprint(copy)["demo.bronze.items"][0] == 4


def test_a_table_whose_files_lie_outside_the_project_is_refused(make_project, spark, tmp_path):
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n"})
    engine = Engine(root)
    assert run_one(engine, "demo.bronze.items").status == "success"
    # another project's table registered on main by hand (another engine, or a hand-edited catalog)
    other = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 2 AS id\n"}, name="other")
    assert run_one(Engine(other), "demo.bronze.items").status == "success"
    foreign = Engine(other).catalog.table_pointers("main")["demo.bronze.items"]
    import sqlite3

    with sqlite3.connect(root / ".ratui" / "ratui.db") as conn:
        conn.execute("UPDATE iceberg_tables SET metadata_location = ? WHERE catalog_name = 'main'", (foreign,))
    with pytest.raises(RatuiError) as caught:
        Engine(root).catalog.load_table("main", "demo.bronze.items")
    assert caught.value.code == "RAT-PTH-002"
