"""scd2 merge-on-read: a change spread over a multi-file scd2 table closes each changed key's open version with a
position delete (its file untouched) plus an appended closed copy, and opens the new versions; the table then holds
exactly the versions a straightforward Spark SQL computation of scd2 over the previous state gives."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from ratui.engine.iceberg.read import data_files, deletes_of, read_table
from tests.engine.write.test_strategies import Project, direct

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SCHEMA = "k long, v string, w long"
TARGET = 28_000  # bytes: about 2,000 of these rows a file (a first write estimates 14.4 bytes a row)
SMALL = 12_000  # bytes: 1,000 rows a file (the fewest a file is written with)


@pytest.fixture
def project(spark, tmp_path):
    p = Project(tmp_path / "proj")
    yield p
    p.close()


def ordered(rows) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=lambda t: tuple((v is None, v if v is not None else 0) for v in t))


def versions(spark, table) -> list[tuple]:
    """Every version of the table as (k, v, w, valid_from µs, valid_to µs), read by ratui's Spark read."""
    read_table(spark, table).createOrReplaceTempView("scd2_now")
    return ordered(spark.sql(
        "SELECT k, v, w, unix_micros(valid_from), unix_micros(valid_to) FROM scd2_now").collect())


def pyiceberg_versions(table) -> list[tuple]:
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    micros = lambda t: None if t is None else (t - epoch) // timedelta(microseconds=1)  # noqa: E731
    return ordered((r["k"], r["v"], r["w"], micros(r["valid_from"]), micros(r["valid_to"]))
                   for r in table.scan().to_arrow().to_pylist())


def expected_scd2(spark, before: list[tuple], batch: list[tuple], at: datetime) -> list[tuple]:
    """scd2 of `batch` (one row per key) over the versions `before`, in plain Spark SQL: a batch row whose key has
    no open version, or whose open version differs in v or w (NULL-safe), closes that version at `at` and opens
    a new one at `at`; every other row stays as it was."""
    spark.createDataFrame(before, "k long, v string, w long, vf long, vt long").createOrReplaceTempView("scd2_before")
    spark.createDataFrame(batch, SCHEMA).createOrReplaceTempView("scd2_batch")
    t = int((at - datetime(1970, 1, 1, tzinfo=timezone.utc)) / timedelta(microseconds=1))
    rows = spark.sql(f"""
        WITH open AS (SELECT *, true AS present FROM scd2_before WHERE vt IS NULL),
        changed AS (
            SELECT b.* FROM scd2_batch b LEFT JOIN open o ON b.k <=> o.k
            WHERE o.present IS NULL OR NOT (b.v <=> o.v AND b.w <=> o.w))
        SELECT k, v, w, vf,
               CASE WHEN vt IS NULL AND EXISTS (SELECT 1 FROM changed c WHERE c.k <=> t.k) THEN {t} ELSE vt END
        FROM scd2_before t
        UNION ALL
        SELECT k, v, w, {t}, CAST(NULL AS BIGINT) FROM changed
    """).collect()
    return ordered(rows)


def test_a_spread_change_closes_versions_by_position_and_rewrites_no_file(spark, project):
    first = [(k, f"v{k}", k % 7) for k in range(10_000)] + [(None, "nul", 0)]
    direct(spark, project, "d", "scd2", first, SCHEMA, unique_key="k", run_started_at=T0, target_file_size=TARGET)
    table = project.table("d")
    assert len(data_files(table)) >= 4
    rounds = [
        # (the batch keys are unique: ratui's dedupe of a batch is tested elsewhere, the expected SQL leaves it out)
    # every 50th key changed (spread over every file, 2% of each), some unchanged, new keys, the NULL key
        [(k, f"v{k}-1", k % 7) for k in range(0, 10_000, 50)]
        + [(k, f"v{k}", k % 7) for k in range(7, 10_000, 97) if k % 50]
        + [(k, f"new{k}", None) for k in range(20_000, 20_050)] + [(None, "nul-1", 0)],
        # again: keys changed in the previous round (open versions now in that round's file), a w set to NULL,
        # and keys changed for the first time
        [(k, f"v{k}-2", k % 7) for k in range(0, 10_000, 100)] + [(k, f"v{k}", None) for k in range(25, 10_000, 200)]
        + [(20_001, "new20001", None), (20_002, "changed", None)],
    ]
    for i, batch in enumerate(rounds, start=1):
        at = T0 + timedelta(days=i)
        table = project.table("d")
        before_files = {f.file_path for f in data_files(table)}
        before = versions(spark, table)
        want = expected_scd2(spark, before, batch, at)
        out = direct(spark, project, "d", "scd2", batch, SCHEMA, unique_key="k", run_started_at=at,
                     target_file_size=TARGET)
        table = project.table("d")
        assert versions(spark, table) == want == pyiceberg_versions(table)
        closed = sum(1 for r in want if r[4] is not None) - sum(1 for r in before if r[4] is not None)
        assert out.rows_written == len(want) - len(before) and closed > 0
        if i == 1:
            # a small share of each file changes: no data file is rewritten or removed, each gets a delete file
            # naming exactly its closed versions
            assert (out.files_rewritten, out.files_removed) == (0, 0)
            assert before_files <= {f.file_path for f in data_files(table)}
            assert out.rows_deleted_by_position == closed
            assert out.delete_files_added == len([f for f in data_files(table) if deletes_of(table, f)]) >= 4
        else:
            # every file the change does not reach is carried over as it was
            assert len(before_files - {f.file_path for f in data_files(table)}) == out.files_removed
            assert out.rows_deleted_by_position <= closed and out.delete_files_added > 0
        for f in data_files(table):
            for d in deletes_of(table, f):
                assert d.record_count <= f.record_count


def test_copy_on_write_gives_the_same_versions(spark, project):
    first = [(k, f"v{k}", k % 7) for k in range(10_000)]
    batch = [(k, f"v{k}-1", None) for k in range(0, 10_000, 50)] + [(30_000, "new", 1)]
    for name, mor in (("mor", True), ("cow", False)):
        direct(spark, project, name, "scd2", first, SCHEMA, unique_key="k", run_started_at=T0,
               target_file_size=TARGET)
        files = len(data_files(project.table(name)))
        out = direct(spark, project, name, "scd2", batch, SCHEMA, unique_key="k", merge_on_read=mor,
                     run_started_at=T0 + timedelta(days=1), target_file_size=TARGET)
        assert (out.files_rewritten, out.delete_files_added) == ((0, files) if mor else (files, 0))
    assert versions(spark, project.table("mor")) == versions(spark, project.table("cow"))


@pytest.mark.parametrize("local", [True, False], ids=["batch-on-driver", "batch-by-ranges"])
def test_open_versions_are_compared_alike_whichever_way_the_batch_keys_are_found(spark, project, monkeypatch, local):
    """A small batch's keys come to the driver (candidate files from each key tuple, an IN filter on the key
    column); a large one is found through its key range. Either way: a row changed only in a non-key column
    closes the old version and opens a new one, a row sent again unchanged (NULLs equal to NULLs) opens nothing,
    new keys open, and the NULL key is a key like any other. A batch of changed and new keys alone opens one
    version a row; the same batch again opens none."""
    import ratui.engine.write.row_replacement as row_replacement

    if not local:
        monkeypatch.setattr(row_replacement, "LOCAL_KEYS_MAX", 0)
    first = [(k, f"v{k}", None if k % 13 == 0 else k % 7) for k in range(4_000)] + [(None, "nul", None)]
    direct(spark, project, "d", "scd2", first, SCHEMA, unique_key="k", run_started_at=T0, target_file_size=SMALL)
    assert len(data_files(project.table("d"))) >= 4
    unchanged = ([(k, f"v{k}", None) for k in range(0, 4_000, 13 * 20)]  # w NULL as before
                 + [(k, f"v{k}", k % 7) for k in range(3, 4_000, 280) if k % 13]
                 + [(None, "nul", None)])  # the NULL key
    mixed = ([(k, f"v{k}", (k % 7) + 1) for k in range(1, 4_000, 160)]  # only w changes
             + unchanged
             + [(k, None, k % 7) for k in range(5, 4_000, 360)]  # v becomes NULL
             + [(50_000, "new", None)])  # a new key
    changed_or_new = [(k, f"v{k}-2", 1) for k in range(2, 4_000, 133)] + [(60_000, "new", 2), (None, "nul-2", None)]
    at = T0
    for batch in (mixed, changed_or_new, changed_or_new):
        at += timedelta(days=1)
        before = versions(spark, project.table("d"))
        want = expected_scd2(spark, before, batch, at)
        snap = project.table("d").current_snapshot().snapshot_id
        out = direct(spark, project, "d", "scd2", batch, SCHEMA, unique_key="k", run_started_at=at,
                     target_file_size=SMALL)
        table = project.table("d")
        assert versions(spark, table) == want == pyiceberg_versions(table)
        assert out.rows_written == len(want) - len(before)
        if batch is mixed:
            assert out.rows_written == len(batch) - len(unchanged) and out.files_rewritten == 0
        elif out.rows_written:
            assert out.rows_written == len(batch)
        else:  # the same batch again: no version opened or closed, no snapshot
            assert table.current_snapshot().snapshot_id == snap and "no key changed" in " ".join(out.notes)
    assert out.rows_written == 0


def test_a_file_of_closed_versions_alone_is_never_read(spark, project, monkeypatch):
    """A copy-on-write change that closes every version of a file, keeping its layout, leaves a file whose
    statistics show no open version: later changes to its keys skip it, and their versions are still exact."""
    import ratui.engine.write.row_replacement as row_replacement
    from ratui.engine.write.scd2 import _may_hold_open

    monkeypatch.setattr(row_replacement, "KEEP_LAYOUT_MIN_ROWS", 0)
    for i in range(3):
        rows = [(k, f"v{k}", 0) for k in range(i * 100, i * 100 + 100)]
        direct(spark, project, "d", "scd2", rows, SCHEMA, unique_key="k", run_started_at=T0)
    at = T0 + timedelta(days=1)
    direct(spark, project, "d", "scd2", [(k, f"v{k}", 1) for k in range(100)], SCHEMA, unique_key="k",
           run_started_at=at, merge_on_read=False)
    table = project.table("d")
    vt = table.schema().find_field("valid_to")
    closed_only = [f for f in data_files(table) if not _may_hold_open(f, vt)]
    assert len(closed_only) == 1 and closed_only[0].record_count == 100
    for merge_on_read in (True, False):
        at += timedelta(days=1)
        batch = [(k, f"v{k}", at.day) for k in range(0, 300, 7)] + [(1_000, "new", None)]
        before = versions(spark, project.table("d"))
        want = expected_scd2(spark, before, batch, at)
        direct(spark, project, "d", "scd2", batch, SCHEMA, unique_key="k", run_started_at=at,
               merge_on_read=merge_on_read)
        table = project.table("d")
        assert versions(spark, table) == want == pyiceberg_versions(table)
        assert closed_only[0].file_path in {f.file_path for f in data_files(table)}  # untouched
