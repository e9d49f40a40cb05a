"""The state database of every earlier ratui that shipped a different schema opens with today's: the numbered
steps (state/migrations.py) bring it to the schema a new database gets, its rows stay readable, and its version is
recorded so the steps run once. The schemas are files in schemas/, each dumped from the ratui of that commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.state import migrations

SCHEMAS = sorted((Path(__file__).parent / "schemas").glob("*.sql"))


def project(root: Path) -> Path:
    (root / "demo" / "pipelines" / "bronze" / "a").mkdir(parents=True)
    (root / "ratui.yaml").write_text("namespace: demo\n")
    (root / "demo" / "pipelines" / "bronze" / "a" / "pipeline.sql").write_text("SELECT 1 AS id\n")
    return root


def opened(root: Path) -> Engine:
    """Today's ratui on the project: every owner of a table opens it (the catalog and the reaper included)."""
    engine = Engine.open(root)
    engine.refs()
    engine.reaper()
    return engine


def shape(db: Path) -> tuple[int, dict[str, set[str]]]:
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                             "'sqlite_%'")]
        return migrations.version(conn), {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")}
                                          for t in tables}
    finally:
        conn.close()


def test_there_is_a_schema_of_each_shipped_version():
    assert len(SCHEMAS) >= 5  # from the first ratui with a state database on


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda p: p.stem)
def test_every_shipped_database_opens_as_todays(tmp_path, schema):
    fresh = project(tmp_path / "fresh")
    opened(fresh).close()
    root = project(tmp_path / "old")
    db = root / ".ratui" / "ratui.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.executescript(schema.read_text())
    # rows that ratui left: a finished run, and a landing file it archived (under its plain name before purge
    # times existed, with archived_to set)
    conn.execute("INSERT INTO runs (id, pipeline, status, strategy, run_type, reason) VALUES ('260101000000aaaa01', "
                 "'demo.bronze.a', 'success', 'full_refresh', 'backfill', 'first run')")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(landing_files)")}
    archived = str(root / "demo" / "landing" / "z" / "_processed" / "260101000000aaaa01")
    conn.execute("INSERT INTO landing_files (namespace, zone, pipeline, file, size, mtime_ns, state, attempts, "
                 "archived_to, updated_at) VALUES ('demo', 'z', 'demo.bronze.a', 'a.csv', 3, 1, 'loaded', 1, ?, "
                 "'2026-01-01T00:00:00Z')", (archived,))
    conn.commit()
    conn.close()
    assert shape(db)[0] == 0  # no version recorded: a database of before the numbered steps

    opened(root).close()
    assert shape(db) == shape(fresh / ".ratui" / "ratui.db")  # every table and column a new database has
    assert shape(db)[0] == migrations.CURRENT
    engine = Engine.open(root)
    old = engine.get_run("260101000000aaaa01")
    assert (old["status"], old["run_type"], old["reason"]) == ("success", "rebuild", "first run")
    (row,) = engine.state.ledger.files("demo", "z")
    expected = "a.csv" if "purged_at" in columns else "_processed/260101000000aaaa01/a.csv"
    assert row.file == expected and row.state == "loaded"
    engine.close()


# (strategy, reason) of runs an earlier ratui typed 'backfill' -> the run type today's ratui gives such a run
BACKFILLS = {
    ("full_refresh", "first run"): "rebuild",
    ("incremental", "first run on dev"): "rebuild",
    ("append_only", "its table is missing on dev"): "rebuild",
    ("full_refresh", "definition changed: pipeline.sql"): "full",
    ("append_only", "definition changed: config.yaml, pipeline.sql"): "incremental",
    ("incremental", "definition has errors"): "incremental",
    (None, "definition has errors"): "full",
    ("scd2", "change detection failed (disk I/O error); running"): "incremental",
}


def test_runs_typed_backfill_read_as_todays_run_types(tmp_path):
    """History reads as a new run would: no 'backfill' left, each run typed by what it did; other runs untouched."""
    root = project(tmp_path / "p")
    opened(root).close()
    db = root / ".ratui" / "ratui.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 4")  # a database of the ratui before step 5
    rows = [(f"2601010000000000{i:02d}", "demo.bronze.a", "success", strategy, "backfill", reason)
            for i, (strategy, reason) in enumerate(BACKFILLS)]
    rows.append(("260101000000000099", "demo.bronze.a", "success", "incremental", "incremental",
                 "upstream changed: bronze.b"))
    conn.executemany("INSERT INTO runs (id, pipeline, status, strategy, run_type, reason) VALUES (?, ?, ?, ?, ?, ?)",
                     rows)
    conn.commit()
    conn.close()
    migrations._done.clear()  # as a new process would see it

    engine = Engine.open(root)
    try:
        typed = {(r["strategy"], r["reason"]): r["run_type"] for r in (engine.get_run(row[0]) for row in rows)}
    finally:
        engine.close()
    assert typed == {**BACKFILLS, ("incremental", "upstream changed: bronze.b"): "incremental"}
    assert shape(db)[0] == migrations.CURRENT


def test_the_steps_run_once_and_a_newer_database_is_refused(tmp_path):
    root = project(tmp_path / "p")
    opened(root).close()
    db = root / ".ratui" / "ratui.db"
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {migrations.CURRENT + 1}")  # written by a newer ratui
    conn.close()
    migrations._done.clear()  # as a new process would see it
    with pytest.raises(RatuiError) as refused:
        migrations.migrate(db)
    assert refused.value.code == "RAT-PRJ-008" and "newer ratui" in refused.value.message
