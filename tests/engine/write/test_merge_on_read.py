"""Merge-on-read through the engine: position deletes written by real runs, applied by every reader (ratui's queries
and quality tests, plain PyIceberg), compacted by the reaper, and processes killed mid-write and mid-compaction
leaving main as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ratui.engine.iceberg.read import data_files, deletes_of, row_count
from ratui.engine.facade.engine import Engine

# the first run loads 2000 rows; every later run changes 100 of them (5% of the one data file: merge-on-read)
PIPELINE = """\
-- @merge_strategy: incremental
-- @unique_key: id
SELECT id, concat('v', CAST(id AS STRING), '-{{ run_started_at }}') AS v, id % 7 AS g
FROM range(0, 2000) AS t(id)
{% if is_incremental %}WHERE id % 20 = 0{% endif %}
"""
TEST = "SELECT id, COUNT(*) AS n FROM {{ this }} GROUP BY id HAVING COUNT(*) > 1\n"


@pytest.fixture
def mor_project(tmp_path, spark):
    from tests.conftest import TEST_SETTINGS, write_files

    root = tmp_path / "proj"
    root.mkdir()
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo") + "reaper:\n  compact_deleted_percent: 8\n")
    write_files(root, {"demo/pipelines/silver/t/pipeline.sql": PIPELINE,
                       "demo/pipelines/silver/t/tests/quality/unique_id.sql": TEST})
    return root


def run(engine: Engine, **kw):
    (result,) = engine.run(engine.compile().select(["t"]), **kw)
    assert result.status == "success", result.error
    return result


def main_rows(engine: Engine) -> dict[int, str]:
    columns, rows, _ = engine.query("SELECT id, v FROM silver.t", limit=10_000)
    return {r[0]: r[1] for r in rows}


def pyiceberg_rows(engine: Engine) -> dict[int, str]:
    return {r["id"]: r["v"] for r in engine.load_table("main", "demo.silver.t").scan().to_arrow().to_pylist()}


def test_runs_write_position_deletes_and_every_reader_sees_one_row_per_key(mor_project):
    engine = Engine.open(mor_project)
    assert run(engine).rows_written == 2000  # `{% if is_incremental %}` (no call) is false on the first run
    first = main_rows(engine)
    result = run(engine, force=True)
    write = result.write
    assert result.rows_written == 100
    assert (write["delete_files_added"], write["rows_deleted_by_position"], write["files_rewritten"]) == (1, 100, 0)
    # the quality test (one row per id) read the branch with the deletes applied: it passed
    assert [q["status"] for q in result.quality] == ["passed"]
    rows = main_rows(engine)
    assert len(rows) == 2000 and rows == pyiceberg_rows(engine)
    changed = {k for k in rows if rows[k] != first[k]}
    assert changed == set(range(0, 2000, 20))
    table = engine.load_table("main", "demo.silver.t")
    assert row_count(table) == 2000
    big = max(data_files(table), key=lambda f: f.record_count)
    assert big.record_count == 2000 and len(deletes_of(table, big)) == 1


def test_reaper_compacts_files_past_the_deleted_share_and_keeps_every_row(mor_project):
    engine = Engine.open(mor_project)
    run(engine)
    run(engine, force=True)  # 5% of the big file deleted: below the project's 8%
    preview = engine.reap(dry_run=True, tasks=["compaction"])
    assert preview.tasks["compaction"].found == []
    # a second change of other rows (offset by 10): 10% of the file deleted -> compacted
    (mor_project / "demo/pipelines/silver/t/pipeline.sql").write_text(PIPELINE.replace("id % 20 = 0", "id % 20 = 10"))
    run(engine)
    before = main_rows(engine)
    table = engine.load_table("main", "demo.silver.t")
    big = max(data_files(table), key=lambda f: f.record_count)
    assert len(deletes_of(table, big)) == 2
    preview = engine.reap(dry_run=True, tasks=["compaction"])
    (item,) = preview.tasks["compaction"].found
    assert (item["rows"], item["deleted_rows"], item["delete_files"]) == (2000, 200, 2)
    assert engine.load_table("main", "demo.silver.t").metadata_location == table.metadata_location  # dry: untouched

    report = engine.reap(tasks=["compaction"])
    assert [i["name"] for i in report.tasks["compaction"].removed] == [item["name"]]
    table = engine.load_table("main", "demo.silver.t")
    assert all(not deletes_of(table, f) for f in data_files(table))
    props = table.current_snapshot().summary.additional_properties
    assert props.get("total-delete-files", "0") == "0" and row_count(table) == 2000
    assert main_rows(engine) == before == pyiceberg_rows(engine)
    assert engine.reap(dry_run=True, tasks=["compaction"]).tasks["compaction"].found == []


def _kill(root, args: list[str], point: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, RATUI_FAILPOINT=point)
    return subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(root)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_killed_before_a_merge_on_read_commit_main_is_unchanged(mor_project):
    engine = Engine.open(mor_project)
    run(engine)
    before, pointers = main_rows(engine), engine.table_pointers()
    proc = _kill(mor_project, ["run", "t", "--force"], "kill:commit")
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert engine.table_pointers() == pointers and main_rows(engine) == before
    again = Engine.open(mor_project)
    assert len(again.recover()) == 1
    run(again, force=True)  # and the next run lands normally
    assert len(main_rows(again)) == 2000


def test_killed_mid_compaction_main_is_unchanged_and_the_next_pass_compacts(mor_project):
    engine = Engine.open(mor_project)
    run(engine)
    run(engine, force=True)
    (mor_project / "demo/pipelines/silver/t/pipeline.sql").write_text(PIPELINE.replace("id % 20 = 0", "id % 20 = 10"))
    run(engine)
    before, pointers = main_rows(engine), engine.table_pointers()
    proc = _kill(mor_project, ["reap"], "kill:compact")
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert engine.table_pointers() == pointers and main_rows(engine) == before
    report = Engine.open(mor_project).reap(tasks=["compaction"])
    assert len(report.tasks["compaction"].removed) == 1
    assert main_rows(engine) == before


def test_a_change_of_a_thousand_spread_keys_merges_in_a_jvm_of_its_own(tmp_path):
    """1,000 changed keys spread over a table: the batch's key values filter the table's files without pushing a
    1,000-value IN into the Parquet reader (it recursed past an executor thread's stack and took the JVM down). Run
    as a user would, in a `ratui run` process of its own: a regression kills that JVM, not the suite's."""
    from tests.conftest import TEST_SETTINGS, write_files

    root = tmp_path / "proj"
    root.mkdir()
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo"))
    write_files(root, {"demo/pipelines/silver/t/pipeline.sql": (
        "-- @merge_strategy: incremental\n-- @unique_key: id\n"
        "SELECT id, concat('v', CAST(id AS STRING), '-{{ run_started_at }}') AS v FROM range(0, 20000) AS t(id)\n"
        "{% if is_incremental() %}WHERE id % 20 = 0{% endif %}\n")})

    def ratui_run(*extra: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root), "--json", *extra],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert ratui_run()["rows_written"] == 20000
    first = {r["id"]: r["v"] for r in Engine.open(root).load_table("main", "demo.silver.t").scan().to_arrow()
             .to_pylist()}
    changed = ratui_run("--force")
    assert changed["status"] == "success" and changed["rows_written"] == 1000
    rows = {r["id"]: r["v"] for r in Engine.open(root).load_table("main", "demo.silver.t").scan().to_arrow()
            .to_pylist()}
    assert len(rows) == 20000 and {k for k in rows if rows[k] != first[k]} == set(range(0, 20000, 20))
