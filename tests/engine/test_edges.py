"""The edges of write-audit-publish: moved projects, paths outside the project, landing files that lie,
full refreshes after bookkeeping, and errors that point at the line (real Spark, Iceberg and SQLite)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.run.record import RunRecord

from mainstate import main_fingerprint, run_one


def tree_state(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under `folder` with its mtime and content hash: proof that nothing there was touched."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(folder))] = (path.stat().st_mtime_ns, digest)
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
    assert run_one(Engine.open(root), "demo.bronze.items").status == "success"
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    original = tree_state(root / "demo" / "warehouse")
    before = main_fingerprint(copy)

    (copy / "demo/landing/items/b.csv").write_text("id,name\n2,B\n3,c\n")
    result = run_one(Engine.open(copy), "demo.bronze.items")
    assert result.status == "success", result.error
    assert tree_state(root / "demo" / "warehouse") == original  # the original was not read into or written
    after = main_fingerprint(copy)
    assert after["demo.bronze.items"][0] == 3 and before["demo.bronze.items"][0] == 2
    assert main_fingerprint(root)["demo.bronze.items"][0] == 2

    # the original gone: the copy still reads every table and its history of files
    shutil.rmtree(root)
    assert main_fingerprint(copy) == after
    (copy / "demo/landing/items/c.csv").write_text("id,name\n4,d\n")
    assert run_one(Engine.open(copy), "demo.bronze.items").status == "success"
    assert main_fingerprint(copy)["demo.bronze.items"][0] == 4


APPEND_NEW_FILES = """\
-- @merge_strategy: append_only
-- @landing_mode: new_files
SELECT * FROM {{ landing_zone('items') }}
"""


def test_a_project_copied_without_its_file_times_loads_nothing_twice(make_project, spark, tmp_path):
    """`cp -r` (or a sync tool, or `touch`) gives every landing file a new modification time: the ledger tells
    the same bytes from a new version by their digest, so an append-only table gains no duplicate, on main or on
    a branch; a file whose bytes did change (same size) is loaded again as a new version."""
    root = make_project({
        "demo/pipelines/bronze/items/pipeline.sql": APPEND_NEW_FILES,
        "demo/landing/items/a.csv": "id,name\n1,a\n2,b\n",
        "demo/landing/items/b.csv": "id,name\n3,c\n",
    })
    assert run_one(Engine.open(root), "demo.bronze.items").status == "success"
    copy = tmp_path / "copied"
    shutil.copytree(root, copy, copy_function=shutil.copy)  # contents and modes, not times: as `cp -r` does
    assert (copy / "demo/landing/items/a.csv").stat().st_mtime_ns != (root / "demo/landing/items/a.csv").stat() \
        .st_mtime_ns
    engine = Engine.open(copy)
    engine.create_branch("dev")
    result = run_one(engine, "demo.bronze.items", force=True)
    assert result.status == "success", result.error
    assert rows_on_main(engine, "demo.bronze.items") == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"},
                                                         {"id": 3, "name": "c"}]
    assert {f.file: f.state for f in engine.state.ledger.files("demo", "items")} == {"a.csv": "loaded",
                                                                                     "b.csv": "loaded"}
    assert [r.status for r in engine.run(["demo.bronze.items"], force=True, ref="dev")] == ["success"]
    assert engine.query("SELECT count(*) FROM bronze.items", ref="dev")[1] == [[3]]
    # the same size, other bytes: a new version of the file, loaded again
    later = (copy / "demo/landing/items/b.csv").stat().st_mtime_ns + 5_000_000_000
    (copy / "demo/landing/items/b.csv").write_text("id,name\n4,d\n")
    os.utime(copy / "demo/landing/items/b.csv", ns=(later, later))
    assert run_one(engine, "demo.bronze.items").status == "success"
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.items")] == [1, 2, 3, 4]


def test_a_table_whose_files_lie_outside_the_project_is_refused(make_project, spark, tmp_path):
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n"})
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.items").status == "success"
    # another project's table registered on main by hand (another engine, or a hand-edited catalog)
    other = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 2 AS id\n"}, name="other")
    assert run_one(Engine.open(other), "demo.bronze.items").status == "success"
    foreign = Engine.open(other).state.catalog.table_pointers("main")["demo.bronze.items"]
    import sqlite3

    with sqlite3.connect(root / ".ratui" / "ratui.db") as conn:
        conn.execute("UPDATE iceberg_tables SET metadata_location = ? WHERE catalog_name = 'main'", (foreign,))
    with pytest.raises(RatuiError) as caught:
        Engine.open(root).state.catalog.load_table("main", "demo.bronze.items")
    assert caught.value.code == "RAT-PTH-002"


# ---------------------------------------------------------------------------------------------- landing files

ALL = "-- @merge_strategy: full_refresh\nSELECT * FROM {{ landing_zone('people') }}\n"


def rows_on_main(engine: Engine, key: str) -> list[dict]:
    table = engine.state.catalog.load_table("main", key).scan().to_arrow()
    return sorted(table.to_pylist(), key=lambda r: str(sorted(r.items())))


def test_csv_columns_map_by_name_whatever_their_order(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/a.csv": "id,email,plan\n1,a@x,free\n",
        "demo/landing/people/b.csv": "plan,id,email\npro,2,b@x\n",
    })
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "success", result.error
    assert rows_on_main(engine, "demo.bronze.people") == [
        {"id": 1, "email": "a@x", "plan": "free"}, {"id": 2, "email": "b@x", "plan": "pro"}]


def test_semicolon_and_tab_separated_csv_files_load_beside_comma_ones(make_project, spark):
    """A spreadsheet's export with semicolons (or tabs) between fields lands in its columns, typed, in the same
    zone as comma-separated files; the run log says which files were read so."""
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/a.csv": "id,email,plan\n1,a@x,free\n",
        "demo/landing/people/b.csv": "\ufeffid;email;plan\r\n2;b@x;pro\r\n3;c@x;\"pro;plus\"\r\n",
        "demo/landing/people/c.csv": "plan\tid\temail\nfree\t4\td@x\n",
    })
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "success", result.error
    assert rows_on_main(engine, "demo.bronze.people") == [
        {"id": 1, "email": "a@x", "plan": "free"}, {"id": 2, "email": "b@x", "plan": "pro"},
        {"id": 3, "email": "c@x", "plan": "pro;plus"}, {"id": 4, "email": "d@x", "plan": "free"}]
    log = [line["message"] for line in engine.state.history.get_run(result.run_id)["logs"]]
    assert any("1 CSV file(s) read with a semicolon between fields" in m and "b.csv" in m for m in log), log
    assert any("1 CSV file(s) read with a tab between fields" in m and "c.csv" in m for m in log), log


def test_a_csv_with_other_columns_is_refused_or_united_by_name(make_project, spark):
    files = {
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/a.csv": "id,email\n1,a@x\n",
        "demo/landing/people/b.csv": "id,plan\n2,pro\n",
    }
    root = make_project(files)
    result = run_one(Engine.open(root), "demo.bronze.people")
    assert result.status == "failed"
    assert result.error["code"] == "RAT-LND-006" and result.error["file"].endswith("people/b.csv")
    assert result.error["line"] == 1 and "missing email" in result.error["message"]
    assert main_fingerprint(root) == {}

    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + "landing:\n  columns: union\n")
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.people").status == "success"
    assert rows_on_main(engine, "demo.bronze.people") == [
        {"id": 1, "email": "a@x", "plan": None}, {"id": 2, "email": None, "plan": "pro"}]


def test_malformed_csv_rows_fail_the_run_at_their_line_or_are_skipped_and_counted(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/a.csv": "id,email,plan\n1,a@x,free\n2,b@x\n3,c@x,pro\n4,d@x,pro,extra\n",
    })
    result = run_one(Engine.open(root), "demo.bronze.people")
    assert result.status == "failed"
    error = result.error
    assert error["code"] == "RAT-LND-007" and error["file"].endswith("people/a.csv") and error["line"] == 3
    assert "2 malformed" in error["message"]
    assert main_fingerprint(root) == {}

    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + "landing:\n  bad_rows: skip\n")
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "success" and result.rows_written == 2
    note = next(n for n in result.notes if n.startswith("RAT-LND-007"))
    assert "2 malformed" in note and "a.csv:3" in note and "a.csv:5" in note
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.people")] == [1, 3]
    shown = engine.state.history.get_run(result.run_id)
    assert any("RAT-LND-007" in n for n in shown["notes"])


@pytest.mark.parametrize("name, good, bad", [
    ("a.csv", "id,email,plan\n1,a@x,free\n2,b@x,pro\n", "id,email,plan\n1,a@x,free\n2,b@x\n"),
    ("a.jsonl", '{"id": 1, "plan": "free"}\n{"id": 2, "plan": "pro"}\n', '{"id": 1, "plan": "free"}\n{"id": 2,\n'),
])
def test_a_landing_file_rewritten_in_place_is_inferred_and_checked_again(make_project, spark, name, good, bad):
    """The process remembers schema inference and clean bad-row checks per set of files; a rerun over the same
    bytes skips both passes, and a file rewritten under the same name (even at the same size) is read afresh."""
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        f"demo/landing/people/{name}": good,
    })
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.people").status == "success"
    again = engine.run(["demo.bronze.people"], force=True)[0]  # the same bytes: remembered, same rows
    assert again.status == "success" and again.rows_written == 2
    before = main_fingerprint(root)
    path = root / "demo/landing/people" / name
    path.write_text(bad.ljust(len(good)))  # same size, other bytes (a torn rewrite)
    result = engine.run(["demo.bronze.people"], force=True)[0]
    assert result.status == "failed"
    assert result.error["code"] == "RAT-LND-007" and result.error["file"].endswith(name)
    assert main_fingerprint(root) == before
    # and a rewrite that changes a column's type is inferred again: ids become strings
    path.write_text(good.replace("1,", "x1,") if name.endswith(".csv") else good.replace('"id": 1', '"id": "x1"'))
    result = engine.run(["demo.bronze.people"], force=True)[0]
    assert result.status == "success", result.error
    assert sorted(r["id"] for r in rows_on_main(engine, "demo.bronze.people")) == ["2", "x1"]


def test_invalid_json_lines_fail_at_their_line(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/a.jsonl": '{"id": 1}\n{"id": 2}\n{"id": 3,\n{"id": 4}\n',
    })
    result = run_one(Engine.open(root), "demo.bronze.people")
    assert result.status == "failed"
    assert result.error["code"] == "RAT-LND-007" and result.error["file"].endswith("a.jsonl")
    assert result.error["line"] == 3


def test_pretty_printed_json_documents_load_beside_json_lines(make_project, spark):
    """A .json file holding one pretty-printed object is a row, one holding an array of objects a row each, and
    JSON-lines files of the same zone load with them (a field some files lack reads as NULL)."""
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/one.json": '{\n  "id": 1,\n  "plan": "free"\n}\n',
        "demo/landing/people/many.json": '[\n  {"id": 2, "plan": "pro"},\n  {"id": 3, "plan": "pro", "vip": true}\n]\n',
        "demo/landing/people/lines.jsonl": '{"id": 4, "plan": "free"}\n{"id": 5, "plan": "free"}\n',
    })
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "success", result.error
    assert rows_on_main(engine, "demo.bronze.people") == [
        {"id": 1, "plan": "free", "vip": None}, {"id": 2, "plan": "pro", "vip": None},
        {"id": 3, "plan": "pro", "vip": True}, {"id": 4, "plan": "free", "vip": None},
        {"id": 5, "plan": "free", "vip": None}]
    again = engine.run(["demo.bronze.people"], force=True)[0]  # remembered schema and check: the same rows
    assert again.status == "success" and again.rows_written == 5


def test_a_broken_json_document_fails_at_its_line_or_is_left_out_whole(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/good.json": '[\n  {"id": 1, "plan": "free"}\n]\n',
        "demo/landing/people/bad.json": '{\n  "id": 2,\n  "plan": "pro",\n}\n',
    })
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "failed"
    error = result.error
    assert (error["code"], error["file"].endswith("people/bad.json"), error["line"]) == ("RAT-LND-007", True, 4)
    assert "not valid JSON documents (bad.json)" in error["message"]
    assert main_fingerprint(root) == {}
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + "landing:\n  bad_rows: skip\n")
    result = run_one(Engine.open(root), "demo.bronze.people")
    assert result.status == "success", result.error
    assert rows_on_main(engine, "demo.bronze.people") == [{"id": 1, "plan": "free"}]
    assert any(n.startswith("RAT-LND-007 1 malformed JSON document(s)") and "bad.json:4" in n for n in result.notes)


def test_empty_files_are_warnings_and_garbage_is_refused(make_project, spark):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/a.csv": "id,email\n1,a@x\n",
        "demo/landing/people/empty.csv": "",
        "demo/pipelines/bronze/things/pipeline.sql": "SELECT * FROM {{ landing_zone('things') }}\n",
        "demo/landing/things/empty.parquet": b"",
    })
    pq.write_table(pa.table({"id": [1, 2]}), root / "demo/landing/things/a.parquet")
    engine = Engine.open(root)
    results = engine.run(["demo.bronze.people", "demo.bronze.things"])
    for result, name in zip(results, ("empty.csv", "empty.parquet")):
        assert result.status == "success", result.error
        assert any(n.startswith("RAT-LND-009") and name in n for n in result.notes)

    before = main_fingerprint(root)
    (root / "demo/landing/people/b.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    result = run_one(Engine.open(root), "demo.bronze.people")
    assert result.status == "failed"
    assert result.error["code"] == "RAT-LND-008" and result.error["file"].endswith("b.csv")
    assert "\\x" not in result.error["message"] and "\x00" not in result.error["message"]
    (root / "demo/landing/people/b.csv").unlink()
    (root / "demo/landing/things/b.parquet").write_bytes(b"PAR1 this is not parquet")
    result = run_one(Engine.open(root), "demo.bronze.things")
    assert result.error["code"] == "RAT-LND-008" and result.error["file"].endswith("b.parquet")
    assert main_fingerprint(root) == before


def test_a_parquet_file_rewritten_in_place_is_read_with_its_new_columns(make_project, spark):
    """Spark's schema of a Parquet landing file is remembered for the same bytes only: the same file rewritten
    under its name with another column is read with it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = make_project({"demo/pipelines/bronze/things/pipeline.sql": "SELECT * FROM {{ landing_zone('things') }}\n"})
    (root / "demo/landing/things").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2]}), root / "demo/landing/things/a.parquet")
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.things").status == "success"
    assert run_one(engine, "demo.bronze.things", force=True).status == "success"  # the remembered schema
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), root / "demo/landing/things/a.parquet")
    result = run_one(engine, "demo.bronze.things", force=True)
    assert result.status == "success", result.error
    rows = engine.state.catalog.load_table("main", "demo.bronze.things").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["name"]) for r in rows) == [(1, "a"), (2, "b"), (3, "c")]


def test_hostile_file_names_load(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/people/pipeline.sql": ALL,
        "demo/landing/people/2024-01-01T10:00:00.csv": "id,email\n1,a@x\n",
        "demo/landing/people/[1] *copy* {x}.csv": "id,email\n2,b@x\n",
        "demo/landing/people/naïve 100%.csv": "id,email\n3,c@x\n",
    })
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.people")
    assert result.status == "success", result.error
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.people")] == [1, 2, 3]


NEW_FILES = """\
-- @merge_strategy: append_only
-- @landing_mode: new_files
-- @archive_landing_zones: true
SELECT * FROM {{ landing_zone('events') }}
"""


def test_full_refresh_rebuilds_from_every_file_the_ledger_knows(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": NEW_FILES,
        "demo/landing/events/a.jsonl": '{"id": 1}\n{"id": 2}\n',
    })
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.events").status == "success"
    (root / "demo/landing/events/b.jsonl").write_text('{"id": 3}\n')
    assert run_one(engine, "demo.bronze.events").status == "success"
    assert not (root / "demo/landing/events/a.jsonl").exists()  # archived
    result = run_one(engine, "demo.bronze.events", full_refresh=True)
    assert result.status == "success", result.error
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.events")] == [1, 2, 3]
    logs = [line["message"] for line in engine.state.history.get_run(result.run_id)["logs"]]
    assert any("(full refresh requested)" in m for m in logs)  # the same words in the CLI and the console

    # an archived file gone: the rebuild refuses, naming it, and main keeps every row
    before = main_fingerprint(root)
    gone = next((root / "demo/landing/events/_processed").glob("*/a.jsonl"))
    gone.unlink()
    result = run_one(engine, "demo.bronze.events", full_refresh=True)
    assert result.status == "failed"
    assert result.error["code"] == "RAT-LND-005" and result.error["file"].endswith("a.jsonl")
    assert main_fingerprint(root) == before


def test_a_reset_file_is_loaded_again_not_skipped_as_unchanged(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": NEW_FILES.replace("-- @archive_landing_zones: true\n", ""),
        "demo/landing/events/a.jsonl": '{"id": 1}\n',
    })
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.events").status == "success"
    assert run_one(engine, "demo.bronze.events").status == "skipped"
    assert engine.state.ledger.reset("demo", "events", "a.jsonl") == 1
    result = run_one(engine, "demo.bronze.events")
    assert result.status == "success" and result.rows_written == 1
    assert "landing files to load: a.jsonl" in result.reason
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.events")] == [1, 1]


def test_an_empty_batch_has_the_columns_the_table_records_and_reads_no_file_for_them(make_project, spark):
    """Nothing new in a zone: the run's empty batch has the zone's columns as the table's snapshot recorded them
    when a run last read its rows (landing_facts.py), so no file is read for them, not even when the files read are
    gone (the reaper's retention); a zone's columns are recorded again only when they change."""
    from ratui.engine.state import landing_facts

    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": NEW_FILES.replace("SELECT *", "SELECT id, at, geo.lat AS lat"),
        "demo/landing/events/a.jsonl": '{"id": 1, "at": "2025-01-02", "geo": {"lat": 1.5}}\n',
    })
    engine = Engine.open(root)
    first = run_one(engine, "demo.bronze.events")
    assert first.status == "success", first.error

    def recorded() -> list[dict]:
        table = engine.state.catalog.load_table("main", "demo.bronze.events")
        return [landing_facts.recorded_columns(table, ["events"])["events"].__dict__,
                *[snapshot.summary.additional_properties.get(landing_facts.COLUMNS_PROPERTY)
                  for snapshot in table.metadata.snapshots]]

    (root / "demo/landing/events/b.jsonl").write_text('{"id": 2, "at": "2025-01-03", "geo": {"lat": 2.5}}\n')
    assert run_one(engine, "demo.bronze.events").status == "success"
    columns, *properties = recorded()
    assert columns["run_id"] == first.run_id  # the second run read the same columns: recorded once
    assert [p is not None for p in properties] == [True, False]
    assert [(f["name"], f["type"] if isinstance(f["type"], str) else "struct") for f in columns["schema"]["fields"]] \
        == [("at", "string"), ("geo", "struct"), ("id", "long")]
    before = main_fingerprint(root)
    for gone in (False, True):
        if gone:
            for archived in (root / "demo/landing/events/_processed").rglob("*.jsonl"):
                archived.unlink()
        result = run_one(engine, "demo.bronze.events", force=True)
        assert (result.status, result.rows_written, result.notes) == (
            "success", 0, ["the batch was empty: nothing appended"]), result.error
        logs = [line["message"] for line in engine.state.history.get_run(result.run_id)["logs"]]
        assert any(f"no file is new: its columns are those Spark read by run {first.run_id} at " in m
                   and m.endswith("as the table records them; no file read for them") for m in logs), logs
        assert any(m.startswith("result: 0 rows, 3 columns") for m in logs), logs
        assert main_fingerprint(root) == before
    assert recorded()[0] == columns


# ---------------------------------------------------------------------------------------------------- paths


def test_symlinks_out_of_the_project_are_refused_unless_allowed(make_project, spark, tmp_path):
    from ratui.engine.project.compiler import compile_project

    outside = tmp_path / "outside"
    (outside / "zone").mkdir(parents=True)
    (outside / "zone" / "x.csv").write_text("id\n1\n")
    (outside / "pipe").mkdir()
    (outside / "pipe" / "pipeline.sql").write_text("SELECT 1 AS id\n")
    root = make_project({"demo/pipelines/bronze/people/pipeline.sql": ALL, "demo/landing/people/a.csv": "id\n2\n"})
    (root / "demo/landing/people/x.csv").symlink_to(outside / "zone" / "x.csv")
    (root / "demo/pipelines/bronze/linked").symlink_to(outside / "pipe")
    errors = compile_project(root).all_errors()
    by_file = {Path(e.file).name: e.code for e in errors}
    assert by_file == {"x.csv": "RAT-PTH-001", "linked": "RAT-PTH-001"}

    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + f"paths:\n  allow_outside: [{outside}]\n")
    assert compile_project(root).all_errors() == []
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.people").status == "success"
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.people")] == [1, 2]


# ------------------------------------------------------------------------------------- errors at their line

@pytest.mark.parametrize("sql, line", [
    ("SELECT 1 AS a\n{# a comment #}\nFORM x\n", 3),                                            # parse error
    ("-- @merge_strategy: full_refresh\nSELECT id,\n{% if is_incremental() %}\n  1 AS x,\n{% endif %}\n"
     "  nosuch_col\nFROM VALUES (1) AS t(id)\n", 6),                                            # analysis error
    ("SELECT id,\n\n  1 / (id - 1) AS r\nFROM VALUES (1) AS t(id)\n", 3),                       # runtime error
])
def test_spark_sql_errors_point_at_the_template_line(make_project, spark, sql, line):
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": sql})
    result = run_one(Engine.open(root), "demo.bronze.items")
    assert result.status == "failed"
    assert result.error["code"] == "RAT-SQL-001"
    assert result.error["file"].endswith("items/pipeline.sql") and result.error["line"] == line
    assert "line" not in result.error["message"].split("]")[-1]  # the rendered SQL's position is not repeated


def test_a_quality_test_error_points_at_the_test_line(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n",
        "demo/pipelines/bronze/items/tests/quality/ids.sql": "-- @severity: error\nSELECT *\nFROM {{ this }}\n"
                                                             "WHERE no_such_column > 1\n",
    })
    result = run_one(Engine.open(root), "demo.bronze.items")
    assert result.status == "failed" and result.error["code"] == "RAT-RUN-003"
    assert result.error["file"].endswith("tests/quality/ids.sql") and result.error["line"] == 4
    assert result.quality[0]["line"] == 4 and result.quality[0]["error"].startswith("RAT-SQL-002")


PY_RAISES = """\
import json


def helper(rows):
    return rows["missing"]


def run(ctx):
    print("starting")
    return helper({})
"""


@pytest.mark.parametrize("text, code, line", [
    (PY_RAISES, "RAT-PY-001", 5),
    ("import sys\n\ndef run(ctx):\n    sys.exit(3)\n", "RAT-PY-001", 4),
    ("def run(ctx):\n    return ctx.sql('SELEC 1')\n", "RAT-PY-001", 2),
    ("def run(ctx):\n    return [1, 2]\n", "RAT-PY-003", None),
])
def test_python_pipeline_failures_name_the_users_line(make_project, spark, capfd, text, code, line):
    root = make_project({"demo/pipelines/bronze/items/pipeline.py": text})
    engine = Engine.open(root)
    result = run_one(engine, "demo.bronze.items")
    assert result.status == "failed"
    assert result.error["code"] == code and result.error["line"] == line
    assert result.error["file"].endswith("items/pipeline.py")
    out, err = capfd.readouterr()
    assert "starting" not in out + err  # prints go to the run log, never the terminal
    if text is PY_RAISES:
        logs = [entry["message"] for entry in engine.state.history.get_run(result.run_id)["logs"]]
        assert "print: starting" in logs


# ------------------------------------------------------------------------------------------- dead processes

def _stale_run(engine: Engine, pid: int, pid_started: float | None) -> str:
    """A run record as another process would have left it."""
    from ratui.engine.run.results import new_run_id

    run_id = new_run_id()
    RunRecord(engine.state.history).create(run_id, "demo.bronze.items", "cli", None, None)
    RunRecord(engine.state.history).update(run_id, status="running", pid=pid, pid_started=pid_started)
    return run_id


def test_a_reused_pid_is_not_taken_for_the_runs_process(make_project, spark):
    import subprocess

    from ratui.engine.state import processes

    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n"})
    engine = Engine.open(root)
    other = subprocess.Popen(["sleep", "60"])
    try:
        started = processes.started_at(other.pid)
        same = _stale_run(engine, other.pid, started)
        reused = _stale_run(engine, other.pid, started - 3600)  # that pid, but a process started an hour before
        assert engine.recover() == [reused]
        assert engine.state.history.get_run(same)["status"] == "running"
        record = engine.state.history.get_run(reused)
        assert record["status"] == "failed" and record["error_code"] == "RAT-RUN-006"
    finally:
        other.kill()
        other.wait()  # reaped: its pid names no process now
    assert processes.started_at(other.pid) is None or processes.started_at(other.pid) != started
    assert engine.recover() == [same]  # and once the process is really gone


def test_a_live_process_notices_a_dead_run_within_seconds(make_project, spark):
    import subprocess
    import time

    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n"})
    console = Engine.open(root)  # a long-lived process, e.g. the console
    console.start_monitor(interval=0.2)
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        run_id = _stale_run(Engine.open(root), gone.pid, None)
        deadline = time.monotonic() + 60  # polled every 0.2 s: the bound is for a loaded machine, not the promise
        while console.state.history.get_run(run_id)["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert console.state.history.get_run(run_id)["status"] == "failed"
    finally:
        console.stop_monitor()


def test_position_deletes_of_another_engine_are_applied_and_equality_deletes_refused(make_project, spark):
    """Another engine deleted a row by position: ratui reads the table without it, as any Iceberg reader must.
    Equality deletes ratui cannot apply: the table is refused, never read with its deleted rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT * FROM VALUES (1), (2) AS t(id)\n",
                         "demo/pipelines/silver/reader/pipeline.sql": "SELECT * FROM {{ ref('bronze.items') }}\n"})
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.items").status == "success"
    table = engine.state.catalog.load_table("main", "demo.bronze.items")
    target = table.scan().plan_files()[0].file
    first_id = pq.read_table(target.file_path).column("id")[0].as_py()
    deletes = root / "demo/warehouse/bronze/items/data/other-engine-deletes.parquet"
    schema = pa.schema([pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
                        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"})])
    pq.write_table(pa.table({"file_path": [target.file_path], "pos": [0]}, schema=schema), deletes)
    entry = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=str(deletes),
                               file_format=FileFormat.PARQUET, partition=Record(), record_count=1,
                               file_size_in_bytes=deletes.stat().st_size)
    entry.spec_id = 0
    with table.transaction() as tx, tx.update_snapshot().fast_append() as snap:
        snap.append_data_file(entry)

    result = run_one(engine, "demo.silver.reader")
    assert result.status == "success" and result.rows_written == 1
    columns, rows, _ = engine.query("SELECT id FROM silver.reader")
    assert rows == [[3 - first_id]]

    equality = root / "demo/warehouse/bronze/items/data/other-engine-eq-deletes.parquet"
    pq.write_table(pa.table({"id": pa.array([2], pa.int32())}), equality)
    table = engine.state.catalog.load_table("main", "demo.bronze.items")
    entry = DataFile.from_args(content=DataFileContent.EQUALITY_DELETES, file_path=str(equality),
                               file_format=FileFormat.PARQUET, partition=Record(), record_count=1,
                               file_size_in_bytes=equality.stat().st_size, equality_ids=[1])
    entry.spec_id = 0
    with table.transaction() as tx, tx.update_snapshot().fast_append() as snap:
        snap.append_data_file(entry)
    before = engine.state.catalog.table_pointers("main")
    result = run_one(engine, "demo.silver.reader", force=True)
    assert result.status == "failed"
    assert result.error["code"] == "RAT-CAT-008" and "delete files" in result.error["message"]
    assert engine.state.catalog.table_pointers("main") == before


def _age(folder: Path, days: int = 30) -> None:
    import time

    old = time.time() - days * 86400
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (old, old))


def test_the_reaper_of_a_copied_project_keeps_every_file_its_main_reads(make_project, spark, tmp_path):

    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": INCREMENTAL,
                         "demo/landing/items/a.csv": "id,name\n1,a\n"})
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.items").status == "success"
    (root / "demo/landing/items/b.csv").write_text("id,name\n1,A\n2,b\n")
    assert run_one(engine, "demo.bronze.items").status == "success"
    # what a killed run leaves behind: a data file no snapshot lists
    leftover = root / "demo/warehouse/bronze/items/data/run-killed-0000/part-0.parquet"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"PAR1 half-written PAR1")
    copy = tmp_path / "moved"
    shutil.copytree(root, copy)
    shutil.rmtree(root)
    _age(copy)
    before = main_fingerprint(copy)
    report = Engine.open(copy).reaper().run(tasks=["orphan_files"])
    task = report.tasks["orphan_files"]
    assert task.error is None
    leftover_name = "demo/warehouse/bronze/items/data/run-killed-0000/part-0.parquet"
    assert [item["name"] for item in task.removed] == [leftover_name]
    assert main_fingerprint(copy) == before  # every file main (and its history) reads is still there


def test_the_reaper_never_deletes_outside_the_project(make_project, spark, tmp_path):

    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": "SELECT 1 AS id\n",
                         "demo/landing/zone/keep.txt": "x"})
    engine = Engine.open(root)
    assert run_one(engine, "demo.bronze.items").status == "success"
    outside = tmp_path / "outside"
    (outside / "files").mkdir(parents=True)
    for name in ("a.parquet", "b.csv"):
        (outside / "files" / name).write_text("precious")
    (outside / "single.parquet").write_text("precious")
    data = root / "demo/warehouse/bronze/items/data"
    (data / "run-linked").symlink_to(outside / "files")
    (data / "linked.parquet").symlink_to(outside / "single.parquet")
    processed = root / "demo/landing/zone/_processed"
    processed.mkdir()
    (processed / "run-old").symlink_to(outside / "files")
    _age(outside)
    _age(root)
    engine.reaper().run(tasks=["orphan_files", "processed_files"])
    assert sorted(p.name for p in outside.rglob("*") if p.is_file()) == ["a.parquet", "b.csv", "single.parquet"]


def test_a_file_with_bad_rows_is_skipped_after_max_attempts_and_the_others_load(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": NEW_FILES.replace("-- @archive_landing_zones: true\n", ""),
        "demo/landing/events/a.jsonl": '{"id": 1}\n',
        "demo/landing/events/bad.jsonl": '{"id": 2}\n{"id": \n',
    })
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + "landing:\n  max_attempts: 2\n")
    engine = Engine.open(root)
    for attempt in (1, 2):
        result = run_one(engine, "demo.bronze.events")
        assert result.status == "failed" and result.error["code"] == "RAT-LND-007"
        ledger = {f.file: (f.state, f.attempts) for f in engine.state.ledger.files("demo", "events")}
        # only the file the error names is to blame
        assert ledger == {"a.jsonl": ("unloaded", 0),
                          "bad.jsonl": ("skipped" if attempt == 2 else "unloaded", attempt)}
        assert main_fingerprint(root) == {}
    result = run_one(engine, "demo.bronze.events")
    assert result.status == "success", result.error
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.events")] == [1]
    # the run that loaded a file counts as its attempt: loaded at the first try shows 1, not 0
    ledger = {f.file: (f.state, f.attempts) for f in engine.state.ledger.files("demo", "events")}
    assert ledger == {"a.jsonl": ("loaded", 1), "bad.jsonl": ("skipped", 2)}


# ------------------------------------------------------------------------------- files changing while read

def _while_writing(engine: Engine, action) -> None:
    """Call `action` once, in the run's thread, as the run's write phase starts (before Spark reads the landing
    files for the write): the file changes between the run's listing and its read."""
    from ratui.engine.events import PhaseStarted

    done = []

    def hook(event) -> None:
        if isinstance(event, PhaseStarted) and event.phase == "write" and not done:
            done.append(True)
            action()

    return engine.subscribe(hook)


def test_a_landing_file_still_being_written_fails_the_run_and_loads_whole_next_time(make_project, spark):
    """A file growing while the run reads it (a copy into the zone still going) must not land half, nor land
    twice: the run fails with RAT-LND-010, main and the ledger stay as they were, and the next run loads the
    finished file exactly once."""
    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": NEW_FILES.replace("-- @archive_landing_zones: true\n", ""),
        "demo/landing/events/a.csv": "id,kind\n1,view\n2,view\n",
    })
    engine = Engine.open(root)
    path = root / "demo/landing/events/a.csv"
    unsubscribe = _while_writing(engine, lambda: path.write_text(path.read_text() + "3,buy\n4,view\n"))
    result = run_one(engine, "demo.bronze.events")
    unsubscribe()
    assert result.status == "failed", result
    assert result.error["code"] == "RAT-LND-010"
    assert result.error["file"] == str(path)
    assert "a.csv (22 -> 35 bytes)" in result.error["message"]
    assert "move it into the zone once complete" in result.error["hint"]
    assert main_fingerprint(root) == {}
    ledger = {f.file: (f.state, f.attempts) for f in engine.state.ledger.files("demo", "events")}
    assert ledger == {"a.csv": ("unloaded", 0)}  # not the file's fault: no attempt counted

    result = run_one(engine, "demo.bronze.events")
    assert result.status == "success", result.error
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.events")] == [1, 2, 3, 4]
    assert run_one(engine, "demo.bronze.events").status == "skipped"  # loaded once: nothing new
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.events")] == [1, 2, 3, 4]


def test_a_landing_file_removed_while_read_names_the_cause_not_a_spark_error(make_project, spark):
    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": NEW_FILES.replace("-- @archive_landing_zones: true\n", ""),
        "demo/landing/events/a.csv": "id,kind\n1,view\n",
        "demo/landing/events/b.csv": "id,kind\n2,view\n",
    })
    engine = Engine.open(root)
    gone = root / "demo/landing/events/b.csv"
    saved = gone.read_bytes()
    unsubscribe = _while_writing(engine, gone.unlink)
    result = run_one(engine, "demo.bronze.events")
    unsubscribe()
    assert result.status == "failed"
    assert result.error["code"] == "RAT-LND-010", result.error
    assert "b.csv (removed)" in result.error["message"] and "the read failed with" in result.error["message"]
    assert main_fingerprint(root) == {}
    ledger = {f.file: (f.state, f.attempts) for f in engine.state.ledger.files("demo", "events")}
    assert ledger == {"a.csv": ("unloaded", 0), "b.csv": ("unloaded", 0)}
    gone.write_bytes(saved)  # put back: both load
    result = run_one(engine, "demo.bronze.events")
    assert result.status == "success", result.error
    assert [r["id"] for r in rows_on_main(engine, "demo.bronze.events")] == [1, 2]
