"""Property tests: generated sequences of batches through the real engine, compared with the reference model.

Each example is a fresh project whose pipeline reads a landing zone; every batch of the sequence is landed as
one Parquet file and run with `Engine.run` (branch, Spark build, strategy, merge into main), and main's table
is compared with reference_model.py after every run. The batches hold duplicate keys, NULL keys and NULL
values, updates of earlier rows (exact repeats too, which scd2 must ignore), empty batches, a column that
comes and goes, and a value column whose type widens from int to long.

Examples are few and small on purpose (CI runs on two shared cores): each run costs about a second.
"""

from __future__ import annotations

import uuid
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from unittest import mock

import reference_model as model
from ratui.engine.iceberg.read import data_files, deletes_of
from test_strategies import Project, assert_partitions_exact

UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)

SETTINGS = settings(max_examples=8, deadline=None, derandomize=False,  # Spark runs: seconds an example
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

KEYS = st.sampled_from([None, 1, 2, 3, 4])
# string keys Spark would read differently in SQL text (quote, backslash, ${...}) beside plain ones
K2 = st.sampled_from([None, "a", "b", "it's", "c\\\\d", "${x}", "\u00fc", ""])
WATERMARKS = st.sampled_from([None, T0, T0 + timedelta(hours=1), T0 + timedelta(days=40)])
# merge-on-read off (None), or on with, per run of the sequence, whether the reaper compacts the table after it
MOR = st.one_of(st.none(), st.lists(st.booleans(), min_size=4, max_size=4))


@st.composite
def batch_sequences(draw, min_runs: int = 2, max_runs: int = 4):
    """[(columns, rows, arrow schema)]: 2-4 batches of 0-6 rows over columns k, k2, v, w, s (+ extra)."""
    runs = []
    pool: list[dict] = []
    for _ in range(draw(st.integers(min_runs, max_runs))):
        wide = draw(st.booleans())
        with_extra = draw(st.booleans())
        schema = pa.schema([("k", pa.int64()), ("k2", pa.string()), ("v", pa.int64() if wide else pa.int32()),
                            ("w", pa.timestamp("us", tz="UTC")), ("s", pa.string())]
                           + ([("extra", pa.string())] if with_extra else []))
        rows = []
        for _ in range(draw(st.integers(0, 6))):
            if pool and draw(st.integers(0, 3)) == 0:
                row = dict(draw(st.sampled_from(pool)))  # an earlier row again: unchanged for scd2
            else:
                row = {"k": draw(KEYS), "k2": draw(K2), "v": draw(st.one_of(st.none(), st.integers(-3, 3))),
                       "w": draw(WATERMARKS), "s": draw(st.sampled_from([None, "x", "y"]))}
                if wide and draw(st.booleans()):
                    row["v"] = 2**40 + draw(st.integers(0, 2))
                row["extra"] = draw(st.sampled_from([None, "e1", "e2"]))
            if not wide and row["v"] is not None and abs(row["v"]) > 2**31 - 1:
                row["v"] = 0
            pool.append(dict(row))
            rows.append({c: row.get(c) for c in schema.names})
        runs.append((schema.names, rows, schema))
    return runs


def _mixed_example():
    """Always tried: a file changed by merge-on-read, compacted, then changed by merge-on-read again."""
    schema = pa.schema([("k", pa.int64()), ("k2", pa.string()), ("v", pa.int32()), ("w", pa.timestamp("us", tz="UTC")),
                        ("s", pa.string())])

    def batch(rows):
        return (schema.names, [dict(zip(schema.names, r)) for r in rows], schema)

    first = batch([(k, "a", k, T0, "x") for k in (1, 2, 3, 4)])
    return [first, batch([(1, "a", 10, T0 + timedelta(hours=1), "y")]),
            batch([(2, "a", 20, T0 + timedelta(hours=1), None), (5, "b", 5, T0, "x")]),
            batch([(3, "a", None, T0 + timedelta(days=40), "y")])], [False, True, False, True]


MIXED_RUNS, MIXED_MOR = _mixed_example()


def _fresh(tmp_path_factory) -> Project:
    return Project(tmp_path_factory.mktemp("prop") / uuid.uuid4().hex[:8])


def _table(project: Project, name: str) -> tuple[list[str], list[dict]]:
    table = project.table(name)
    return [f.name for f in table.schema().fields], table.scan().to_arrow().to_pylist()


def _check_sequence(project: Project, name: str, runs, step, *, partitioned: bool = False,
                    keep_layout: bool = False, mor: list[bool] | None = None) -> None:
    """Run every batch through the engine; after each, main's table must equal the model's, read by plain
    PyIceberg and by ratui's own Spark read (which apply position deletes each their own way).

    keep_layout: force the rewrite path that keeps surviving rows in their files (no shuffle), which
    otherwise only tables with millions of rewritten rows take.
    mor: force merge-on-read for every file a merge touches but does not empty (position-delete files pile up
    across the sequence), which otherwise only files with a small changed share take; after run i, when mor[i],
    the reaper's compaction rewrites every file that has deletes, and the table must still equal the model.
    """
    expected = model.Table()
    if mor is not None:  # compact any file with a deleted row (the setting's minimum, 1%)
        with (project.root / "ratui.yaml").open("a") as f:
            f.write("reaper:\n  compact_deleted_percent: 1\n")
    patch = mock.patch("ratui.engine.write.row_replacement.KEEP_LAYOUT_MIN_ROWS", -1) if keep_layout else nullcontext()
    share = mock.patch("ratui.engine.write.row_replacement.MOR_MAX_SHARE", 1.0) if mor else nullcontext()
    try:
        patch.__enter__()
        share.__enter__()
        for i, (columns, rows, schema) in enumerate(runs):
            project.land(rows, schema)
            result = project.run(name)
            expected = step(expected, columns, rows, result)
            actual_columns, actual_rows = _table(project, name)
            diff = model.differences(expected, actual_columns, actual_rows)
            assert diff is None, f"after run {i + 1} of {len(runs)} (batch {rows}):\n{diff}"
            spark_rows = _spark_rows(project, name)
            diff = model.differences(expected, actual_columns, spark_rows)
            assert diff is None, f"ratui's read, after run {i + 1} of {len(runs)} (batch {rows}):\n{diff}"
            if partitioned:
                assert_partitions_exact(project.table(name))
            if mor is not None and mor[i]:
                report = project.engine.reap(tasks=["compaction"])
                assert not report.tasks["compaction"].kept, report.tasks["compaction"].kept
                table = project.table(name)
                assert not any(deletes_of(table, f) for f in data_files(table)), "compaction left delete files"
                actual_columns, actual_rows = _table(project, name)
                diff = model.differences(expected, actual_columns, actual_rows)
                assert diff is None, f"after compacting run {i + 1}'s result:\n{diff}"
                diff = model.differences(expected, actual_columns, _spark_rows(project, name))
                assert diff is None, f"ratui's read after compacting run {i + 1}'s result:\n{diff}"
                if partitioned:
                    assert_partitions_exact(table)
    finally:
        share.__exit__(None, None, None)
        patch.__exit__(None, None, None)
        project.close()


def _spark_rows(project: Project, name: str) -> list[dict]:
    from ratui.engine.iceberg.read import read_table
    from ratui.engine.spark.session import get_spark

    spark = get_spark(project.engine.settings)
    return read_table(spark, project.table(name)).toArrow().to_pylist()


@pytest.mark.usefixtures("spark")
@SETTINGS
@given(runs=batch_sequences())
def test_full_refresh_matches_the_model(tmp_path_factory, runs):
    project = _fresh(tmp_path_factory)
    project.pipeline("t", "-- @merge_strategy: full_refresh")
    _check_sequence(project, "t", runs, lambda table, cols, rows, _: model.full_refresh(table, cols, rows))


@pytest.mark.usefixtures("spark")
@SETTINGS
@given(runs=batch_sequences())
def test_append_only_matches_the_model(tmp_path_factory, runs):
    project = _fresh(tmp_path_factory)
    project.pipeline("t", "-- @merge_strategy: append_only")
    _check_sequence(project, "t", runs, lambda table, cols, rows, _: model.append_only(table, cols, rows))


@pytest.mark.usefixtures("spark")
@SETTINGS
@given(runs=batch_sequences(), keep_layout=st.booleans(), mor=MOR)
@example(runs=MIXED_RUNS, keep_layout=False, mor=MIXED_MOR)
def test_incremental_matches_the_model(tmp_path_factory, runs, keep_layout, mor):
    project = _fresh(tmp_path_factory)
    project.pipeline("t", """
        -- @merge_strategy: incremental
        -- @unique_key: k, k2
        -- @watermark_column: w
    """)
    _check_sequence(project, "t", runs,
                    lambda table, cols, rows, _: model.incremental(table, cols, rows, ["k", "k2"], "w"),
                    keep_layout=keep_layout, mor=mor)


@pytest.mark.usefixtures("spark")
@SETTINGS
@given(runs=batch_sequences(), mor=MOR)
@example(runs=MIXED_RUNS, mor=MIXED_MOR)
def test_delete_insert_matches_the_model(tmp_path_factory, runs, mor):
    project = _fresh(tmp_path_factory)
    project.pipeline("t", """
        -- @merge_strategy: delete_insert
        -- @unique_key: k
    """)
    _check_sequence(project, "t", runs, lambda table, cols, rows, _: model.delete_insert(table, cols, rows, ["k"]),
                    mor=mor)


@pytest.mark.usefixtures("spark")
@SETTINGS
@given(runs=batch_sequences(), keep_layout=st.booleans(), mor=MOR)
@example(runs=MIXED_RUNS, keep_layout=False, mor=MIXED_MOR)
def test_scd2_matches_the_model(tmp_path_factory, runs, keep_layout, mor):
    project = _fresh(tmp_path_factory)
    project.pipeline("t", """
        -- @merge_strategy: scd2
        -- @unique_key: k, k2
        -- @watermark_column: w
    """)

    def step(table, cols, rows, result):
        at = datetime.fromisoformat(result.write["valid_at"])
        return model.scd2(table, cols, rows, ["k", "k2"], at, watermark="w")

    _check_sequence(project, "t", runs, step, keep_layout=keep_layout, mor=mor)


@pytest.mark.usefixtures("spark")
@SETTINGS
@given(runs=batch_sequences(), mor=MOR)
def test_snapshot_matches_the_model(tmp_path_factory, runs, mor):
    project = _fresh(tmp_path_factory)
    project.pipeline("t", """
        -- @merge_strategy: snapshot
        -- @partition_column: k2
    """)
    _check_sequence(project, "t", runs, lambda table, cols, rows, _: model.snapshot(table, cols, rows, "k2"),
                    mor=mor)


@pytest.mark.usefixtures("spark")
@settings(SETTINGS, max_examples=6)
@given(runs=batch_sequences(), strategy=st.sampled_from(["incremental", "snapshot", "scd2"]),
       keep_layout=st.booleans(), mor=MOR)
def test_partitioned_tables_match_the_model_with_exact_file_partitions(tmp_path_factory, runs, strategy,
                                                                       keep_layout, mor):
    project = _fresh(tmp_path_factory)
    header = {
        "incremental": "-- @merge_strategy: incremental\n-- @unique_key: k\n-- @watermark_column: w",
        "snapshot": "-- @merge_strategy: snapshot\n-- @partition_column: k2",
        "scd2": "-- @merge_strategy: scd2\n-- @unique_key: k",
    }[strategy]
    project.pipeline("t", header, config_yaml="partition_by: [day(w), k2]\n")

    def step(table, cols, rows, result):
        if strategy == "incremental":
            return model.incremental(table, cols, rows, ["k"], "w")
        if strategy == "snapshot":
            return model.snapshot(table, cols, rows, "k2")
        return model.scd2(table, cols, rows, ["k"], datetime.fromisoformat(result.write["valid_at"]))

    _check_sequence(project, "t", runs, step, partitioned=True, keep_layout=keep_layout, mor=mor)
