"""The merge strategies on real Spark and Iceberg: semantics, NULL keys, file pruning, partitioning, schemas.

Most tests go through `Engine.run` on a small project whose pipeline reads a landing zone the test fills
with one Parquet file per batch; a few call `strategies.write` directly where the test needs to control
the run's timestamp or count files. The property tests against the reference model are in
test_strategies_properties.py.
"""

from __future__ import annotations

import textwrap
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ratui.engine.project.config import PipelineConfig
from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.write.strategies import WriteRequest, write

UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = """\
namespace: demo
spark:
  master: local[2]
  config:
    spark.sql.shuffle.partitions: 2
    spark.default.parallelism: 2
"""


# ------------------------------------------------------------------------------------------------ harness


class Project:
    """A throwaway project: pipelines reading landing zones the test fills, run through the real Engine."""

    def __init__(self, root: Path, ns: str = "demo"):
        self.root, self.ns = root, ns
        root.mkdir(parents=True, exist_ok=True)
        (root / "ratui.yaml").write_text(SETTINGS.replace("demo", ns))
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine.open(self.root)
        return self._engine

    def key(self, name: str) -> str:
        return f"{self.ns}.silver.{name}"

    def pipeline(self, name: str, header: str, *, zone: str = "batch", select: str = "*",
                 config_yaml: str | None = None, tests: dict[str, str] | None = None) -> None:
        folder = self.root / self.ns / "pipelines" / "silver" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pipeline.sql").write_text(
            textwrap.dedent(header).strip() + f"\nSELECT {select} FROM {{{{ landing_zone('{zone}') }}}}\n")
        if config_yaml is not None:
            (folder / "config.yaml").write_text(textwrap.dedent(config_yaml))
        for test_name, sql in (tests or {}).items():
            (folder / "tests" / "quality").mkdir(parents=True, exist_ok=True)
            (folder / "tests" / "quality" / f"{test_name}.sql").write_text(sql)

    def land(self, rows: list[dict], schema: pa.Schema, zone: str = "batch") -> None:
        folder = self.root / self.ns / "landing" / zone
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.parquet"):
            old.unlink()
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "batch.parquet")

    def run(self, name: str, *, full_refresh: bool = False, ok: bool = True):
        [result] = self.engine.run([self.key(name)], full_refresh=full_refresh)
        if ok:
            assert result.status == "success", result.error
        return result

    def table(self, name: str, ref: str = "main"):
        return self.engine.state.catalog.load_table(ref, self.key(name))

    def rows(self, name: str, ref: str = "main") -> list[dict]:
        return self.table(name, ref).scan().to_arrow().to_pylist()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()


@pytest.fixture
def project(spark, tmp_path):
    p = Project(tmp_path / "proj")
    yield p
    p.close()


def direct(spark, project: Project, name: str, strategy: str, rows: list[dict], schema: str, *,
           run_started_at=None, merge_on_read: bool = True, **config):
    """strategies.write straight onto main (no run, no branch): for tests that count files or fix the time."""
    config.setdefault("merge_strategy", strategy)
    for key in ("unique_key",):
        if isinstance(config.get(key), str):
            config[key] = (config[key],)
    req = WriteRequest(spark, project.engine.state.catalog, "main", project.key(name), project.root, "t" + name,
                       spark.createDataFrame(rows, schema).coalesce(1), len(rows), PipelineConfig(**config), strategy,
                       run_started_at=run_started_at, merge_on_read=merge_on_read)
    return write(req)


def by(rows: list[dict], *cols: str) -> list[tuple]:
    return sorted((tuple(r[c] for c in cols) for r in rows),
                  key=lambda t: tuple((v is None, v if v is not None else 0) for v in t))


KV = pa.schema([("k", pa.int64()), ("v", pa.string()), ("w", pa.int64())])


# ------------------------------------------------------------------------------------------- semantics


def test_incremental_dedupes_on_first_run_and_treats_null_as_a_key(project):
    project.pipeline("t", """
        -- @merge_strategy: incremental
        -- @unique_key: k
        -- @watermark_column: w
    """)
    project.land([
        {"k": 1, "v": "old", "w": 1}, {"k": 1, "v": "new", "w": 2}, {"k": 1, "v": "older", "w": None},
        {"k": None, "v": "n1", "w": 5}, {"k": None, "v": "n2", "w": 5},  # tie: the last in the batch wins
        {"k": 2, "v": "two", "w": None},
    ], KV)
    project.run("t")
    assert by(project.rows("t"), "k", "v") == [(1, "new"), (2, "two"), (None, "n2")]
    project.land([{"k": None, "v": "n3", "w": 1}, {"k": 3, "v": "three", "w": 1}], KV)
    result = project.run("t")
    assert by(project.rows("t"), "k", "v") == [(1, "new"), (2, "two"), (3, "three"), (None, "n3")]
    assert result.write["rows_written"] == 2


def test_delete_insert_replaces_every_row_of_a_key_and_keeps_batch_duplicates(project):
    project.pipeline("t", """
        -- @merge_strategy: delete_insert
        -- @unique_key: k
    """)
    project.land([{"k": 1, "v": "a", "w": 1}, {"k": 1, "v": "b", "w": 1}, {"k": None, "v": "n", "w": 1},
                  {"k": 2, "v": "c", "w": 1}], KV)
    project.run("t")
    assert by(project.rows("t"), "k", "v") == [(1, "a"), (1, "b"), (2, "c"), (None, "n")]
    project.land([{"k": 1, "v": "x", "w": 2}, {"k": None, "v": "m", "w": 2}, {"k": None, "v": "m2", "w": 2}], KV)
    project.run("t")
    assert by(project.rows("t"), "k", "v") == [(1, "x"), (2, "c"), (None, "m"), (None, "m2")]


def test_snapshot_replaces_only_the_partitions_in_the_batch_null_included(project):
    project.pipeline("t", """
        -- @merge_strategy: snapshot
        -- @partition_column: v
    """)
    project.land([{"k": 1, "v": "a", "w": 1}, {"k": 2, "v": "a", "w": 1}, {"k": 3, "v": "b", "w": 1},
                  {"k": 4, "v": None, "w": 1}], KV)
    project.run("t")
    project.land([{"k": 10, "v": "a", "w": 2}, {"k": 11, "v": None, "w": 2}, {"k": 12, "v": "c", "w": 2}], KV)
    project.run("t")
    assert by(project.rows("t"), "v", "k") == [("a", 10), ("b", 3), ("c", 12), (None, 11)]
    project.land([], KV)
    result = project.run("t")
    assert "no partition replaced" in " ".join(result.notes)
    assert len(project.rows("t")) == 4


def test_snapshot_without_its_partition_column_is_a_coded_error(project):
    project.pipeline("t", """
        -- @merge_strategy: snapshot
        -- @partition_column: day
    """)
    project.land([{"k": 1, "v": "a", "w": 1}], KV)
    result = project.run("t", ok=False)
    assert result.status == "failed" and result.error["code"] == "RAT-WRT-008"


def test_full_refresh_replaces_rows_and_columns_and_says_when_empty(project):
    project.pipeline("t", "-- @merge_strategy: full_refresh")
    project.land([{"k": 1, "v": "a", "w": 1}], KV)
    project.run("t")
    project.land([{"k": 2}], pa.schema([("k", pa.int64())]))
    project.run("t")
    assert project.rows("t") == [{"k": 2}]
    project.land([], pa.schema([("k", pa.int64())]))
    result = project.run("t")
    assert project.rows("t") == []
    assert "the table is now empty" in " ".join(result.notes)


def test_full_refresh_of_an_incremental_pipeline_keeps_one_row_per_key(project):
    project.pipeline("t", """
        -- @merge_strategy: incremental
        -- @unique_key: k
        -- @watermark_column: w
    """)
    project.land([{"k": 1, "v": "a", "w": 2}, {"k": 1, "v": "b", "w": 1}], KV)
    project.run("t", full_refresh=True)
    assert by(project.rows("t"), "k", "v") == [(1, "a")]


# ------------------------------------------------------------------------------------------------- scd2

SCD = "k long, name string, tier string"


def test_scd2_opens_closes_and_keeps_unchanged_keys_at_the_run_timestamp(spark, project):
    t1, t2, t3 = T0, T0 + timedelta(days=1), T0 + timedelta(days=2)
    first = [(1, "ada", "gold"), (2, "bob", "free"), (None, "nul", "free"), (3, "cy", None)]
    out = direct(spark, project, "d", "scd2", first, SCD, run_started_at=t1, unique_key="k")
    assert out.rows_written == 4 and out.valid_at == t1.isoformat()
    # 1 unchanged, 2 changed, NULL key changed, 3 unchanged (NULL tier compares equal to NULL), 4 new;
    # batch duplicates of 2: the last one wins
    second = [(1, "ada", "gold"), (2, "bob", "pro"), (2, "bob", "team"), (None, "nul", "pro"), (3, "cy", None),
              (4, "dee", "free")]
    out = direct(spark, project, "d", "scd2", second, SCD, run_started_at=t2.strftime("%Y-%m-%d %H:%M:%S.%f"),
                 unique_key="k")
    assert out.rows_written == 3  # versions opened: 2, NULL, 4
    rows = project.rows("d")
    assert by(rows, "k", "tier", "valid_from", "valid_to") == [
        (1, "gold", t1, None),
        (2, "free", t1, t2), (2, "team", t2, None),
        (3, None, t1, None),
        (4, "free", t2, None),
        (None, "free", t1, t2), (None, "pro", t2, None),
    ]
    # the same batch again changes nothing and rewrites nothing
    snap = project.table("d").current_snapshot().snapshot_id
    out = direct(spark, project, "d", "scd2", second, SCD, run_started_at=t3, unique_key="k")
    assert out.rows_written == 0 and out.files_added == 0 and out.files_removed == 0
    assert project.table("d").current_snapshot().snapshot_id == snap
    assert "no key changed" in " ".join(out.notes)


def test_scd2_through_the_engine_stamps_versions_with_run_started_at(project):
    project.pipeline("dim", """
        -- @merge_strategy: scd2
        -- @unique_key: k
        -- @scd_valid_from: since
        -- @scd_valid_to: until
    """, select="k, v, CAST('{{ run_started_at }}' AS TIMESTAMP) AS seen_at")
    project.land([{"k": 1, "v": "a", "w": 1}, {"k": 2, "v": "b", "w": 1}], KV)
    project.run("dim")
    project.land([{"k": 1, "v": "a2", "w": 1}], KV)
    result = project.run("dim")
    rows = project.rows("dim")
    assert {"since", "until"} <= set(rows[0]) and "valid_from" not in rows[0]
    # every version a run opens starts at that run's run_started_at, which the pipeline saw as seen_at
    for r in rows:
        assert r["since"] == r["seen_at"]
    closed = [r for r in rows if r["until"] is not None]
    opened_now = [r for r in rows if r["since"] == max(x["since"] for x in rows)]
    assert len(closed) == 1 and closed[0]["k"] == 1 and closed[0]["v"] == "a"  # key 2 was not in the batch
    assert {r["until"] for r in closed} == {opened_now[0]["since"]}
    assert result.write["valid_at"] == opened_now[0]["since"].isoformat()


def test_scd2_result_with_a_validity_column_is_a_coded_error(spark, project):
    with pytest.raises(RatuiError) as err:
        direct(spark, project, "d", "scd2", [(1, T0)], "k long, valid_to timestamp", unique_key="k")
    assert err.value.code == "RAT-WRT-009"


# ------------------------------------------------------------------------------------------------ cost


def _four_files(spark, project: Project, name: str, schema: str = "k long, v string, g string"):
    """A table of four data files holding keys 0-99, 100-199, 200-299, 300-399 (g: one group per file)."""
    for i in range(4):
        rows = [(k, f"v{k}", f"g{i}") for k in range(i * 100, i * 100 + 100)]
        direct(spark, project, name, "append_only", rows, schema)
    assert len(list(project.table(name).scan().plan_files())) == 4


def test_merges_rewrite_only_the_files_that_hold_affected_keys(spark, project):
    """Copy-on-write (merge_on_read off): only the file holding a replaced key is rewritten."""
    _four_files(spark, project, "inc")
    out = direct(spark, project, "inc", "incremental", [(150, "new", "g1"), (1000, "fresh", "gx")],
                 "k long, v string, g string", unique_key="k", merge_on_read=False)
    assert (out.files_rewritten, out.files_removed, out.files_kept, out.delete_files_added) == (1, 1, 3, 0)
    # keys inside a file's range but absent from it: read the key column only, rewrite nothing
    out = direct(spark, project, "inc", "incremental", [(500, "mid", "gy")], "k long, v string, g string",
                 unique_key="k", merge_on_read=False)
    assert (out.files_rewritten, out.files_removed) == (0, 0)
    assert project.table("inc").current_snapshot().summary.additional_properties["total-records"] == "402"

    _four_files(spark, project, "di")
    out = direct(spark, project, "di", "delete_insert", [(250, "x", "g2"), (251, "y", "g2")],
                 "k long, v string, g string", unique_key="k", merge_on_read=False)
    assert (out.files_rewritten, out.files_kept) == (1, 3)


def test_a_small_change_to_a_file_writes_position_deletes_that_every_reader_applies(spark, project):
    """Merge-on-read: 1 row of a 100-row file replaced -> a delete file naming its position, the file untouched;
    ratui's Spark read, its row count and plain PyIceberg all see the new row and not the old one."""
    from ratui.engine.iceberg.read import read_table, row_count

    _four_files(spark, project, "inc")
    before = {t.file.file_path for t in project.table("inc").scan().plan_files()}
    out = direct(spark, project, "inc", "incremental", [(150, "new", "g1"), (1000, "fresh", "gx")],
                 "k long, v string, g string", unique_key="k")
    assert (out.files_rewritten, out.files_removed, out.delete_files_added, out.rows_deleted_by_position) == \
        (0, 0, 1, 1)
    table = project.table("inc")
    tasks = list(table.scan().plan_files())
    assert before <= {t.file.file_path for t in tasks}  # no data file was rewritten
    with_deletes = [t for t in tasks if t.delete_files]
    assert len(with_deletes) == 1 and with_deletes[0].file.record_count == 100
    expected = {k: f"v{k}" for k in range(400)} | {150: "new", 1000: "fresh"}
    pyiceberg_rows = {r["k"]: r["v"] for r in table.scan().to_arrow().to_pylist()}
    spark_rows = {r.k: r.v for r in read_table(spark, table).collect()}
    assert pyiceberg_rows == expected and spark_rows == expected
    assert row_count(table) == 401 == len(table.scan().to_arrow())
    # the same key again: it now lives in the merge's 2-row file (half of it changes: rewritten); the row the
    # delete file took out is never found again
    out = direct(spark, project, "inc", "incremental", [(150, "newer", "g1")], "k long, v string, g string",
                 unique_key="k")
    assert (out.files_rewritten, out.delete_files_added) == (1, 0) and row_count(project.table("inc")) == 401
    assert {r["k"]: r["v"] for r in project.table("inc").scan().to_arrow().to_pylist()}[150] == "newer"


def test_a_file_whose_deleted_share_passes_the_threshold_is_rewritten(spark, project):
    """30 of 100 rows replaced (past MOR_MAX_SHARE): copy-on-write, and the file's earlier delete files go too."""
    _four_files(spark, project, "inc")
    direct(spark, project, "inc", "incremental", [(5, "a", "g0")], "k long, v string, g string", unique_key="k")
    out = direct(spark, project, "inc", "incremental", [(k, "b", "g0") for k in range(10, 40)],
                 "k long, v string, g string", unique_key="k")
    assert (out.files_rewritten, out.delete_files_added) == (1, 0)
    table = project.table("inc")
    assert not [t for t in table.scan().plan_files() if t.delete_files]
    props = table.current_snapshot().summary.additional_properties
    assert props.get("total-position-deletes", "0") == "0" and props.get("total-delete-files", "0") == "0"
    rows = {r["k"]: r["v"] for r in table.scan().to_arrow().to_pylist()}
    assert len(rows) == 400 and rows[5] == "a" and rows[10] == rows[39] == "b"


def test_snapshot_drops_whole_files_of_replaced_partitions_without_rewriting(spark, project):
    _four_files(spark, project, "snap")
    out = direct(spark, project, "snap", "snapshot", [(9, "new", "g2")], "k long, v string, g string",
                 partition_column="g")
    assert (out.files_removed, out.files_rewritten, out.files_kept) == (1, 0, 3)
    rows = project.rows("snap")
    assert len(rows) == 301 and [r["k"] for r in rows if r["g"] == "g2"] == [9]


@pytest.mark.parametrize("mor", [False, True])
def test_scd2_rewrites_only_files_holding_changed_keys(spark, project, mor):
    for i in range(3):
        rows = [(k, "same") for k in range(i * 100, i * 100 + 100)]
        direct(spark, project, "d", "scd2", rows, "k long, v string", unique_key="k",
               run_started_at=T0)
    assert len(list(project.table("d").scan().plan_files())) == 3
    out = direct(spark, project, "d", "scd2", [(5, "same"), (150, "same"), (250, "changed")], "k long, v string",
                 unique_key="k", run_started_at=T0 + timedelta(days=1), merge_on_read=mor)
    # copy-on-write: the one file rewritten; merge-on-read (1 of its 100 rows): a delete file, nothing rewritten
    assert (out.rows_written, out.files_rewritten, out.delete_files_added) == ((1, 0, 1) if mor else (1, 1, 0))
    assert out.files_kept == (3 if mor else 2)
    rows = by(project.rows("d"), "k", "v", "valid_to")
    assert (250, "same", T0 + timedelta(days=1)) in rows and (250, "changed", None) in rows and len(rows) == 301


# ---------------------------------------------------------------------------------------------- partitions


def assert_partitions_exact(table) -> None:
    """Every data file holds rows of one partition only, and its DataFile partition tuple is that value."""
    from pyiceberg.partitioning import partition_record_value

    schema, spec = table.schema(), table.spec()
    for task in table.scan().plan_files():
        f = task.file
        data = pq.read_table(f.file_path)
        for pos, pf in enumerate(spec.fields):
            source = schema.find_field(pf.source_id)
            wanted = str(source.field_id).encode()
            column = next(name for name, field in zip(data.column_names, data.schema)
                          if field.metadata and field.metadata.get(b"PARQUET:field_id") == wanted)
            transform = pf.transform.transform(source.field_type)
            values = {transform(partition_record_value(pf, v, schema)) for v in data.column(column).to_pylist()}
            assert values == {f.partition[pos]}, (f.file_path, pf.name, values, f.partition)


PARTS = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")),
                   ("d", pa.date32()), ("country", pa.string())])


def _part_rows(start: int) -> list[dict]:
    base = [datetime(1969, 12, 31, 23, 30, tzinfo=UTC), datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
            datetime(2024, 3, 1, tzinfo=UTC), datetime(2025, 12, 31, 12, tzinfo=UTC), None]
    rows = []
    for i in range(12):
        ts = base[(i + start) % len(base)]
        rows.append({"id": start + i, "ts": ts, "local": ts.replace(tzinfo=None) if ts else None,
                     "d": ts.date() if ts else None, "country": ["de", "fr", None][i % 3]})
    return rows


def test_partition_by_creates_a_partitioned_table_with_exact_file_partitions(project):
    project.pipeline("p", """
        -- @merge_strategy: incremental
        -- @unique_key: id
    """, config_yaml="""
        partition_by: [hour(ts), day(local), month(d), year(ts), country]
    """)
    project.land(_part_rows(0), PARTS)
    project.run("p")
    table = project.table("p")
    assert [(str(f.transform), f.name) for f in table.spec().fields] == [
        ("hour", "ts_hour"), ("day", "local_day"), ("month", "d_month"), ("year", "ts_year"),
        ("identity", "country")]
    assert_partitions_exact(table)
    project.land(_part_rows(6), PARTS)  # ids 6-11 updated (moved to other partitions), 12-17 new
    result = project.run("p")
    table = project.table("p")
    assert_partitions_exact(table)
    assert sorted(r["id"] for r in project.rows("p")) == list(range(18))
    assert result.write["files_kept"] > 0  # partitions without an affected key are not touched
    # Iceberg's own partition pruning sees the right values
    from pyiceberg.expressions import EqualTo

    assert sorted(r["id"] for r in table.scan(row_filter=EqualTo("country", "fr")).to_arrow().to_pylist()) == \
        sorted(r["id"] for r in project.rows("p") if r["country"] == "fr")


def test_partition_value_without_parquet_statistics_is_read_from_the_file(project):
    project.pipeline("p", "-- @merge_strategy: append_only", config_yaml="partition_by: country\n")
    long_value = "x" * 5000  # over Parquet's 4 KiB statistics limit: no min/max for this column chunk
    project.land([{"id": 1, "country": long_value}, {"id": 2, "country": "de"}, {"id": 3, "country": None}],
                 pa.schema([("id", pa.int64()), ("country", pa.string())]))
    project.run("p")
    table = project.table("p")
    assert_partitions_exact(table)
    assert sorted(((f.file.partition[0] or "")[:3], f.file.record_count) for f in table.scan().plan_files()) == [
        ("", 1), ("de", 1), ("xxx", 1)]


def test_changing_partition_by_needs_a_full_refresh(project):
    project.pipeline("p", """
        -- @merge_strategy: incremental
        -- @unique_key: id
        -- @partition_by: country
    """)
    project.land(_part_rows(0), PARTS)
    project.run("p")
    project.pipeline("p", """
        -- @merge_strategy: incremental
        -- @unique_key: id
        -- @partition_by: month(ts)
    """)
    result = project.run("p", ok=False)
    assert result.error["code"] == "RAT-WRT-007"
    assert [f.name for f in project.table("p").spec().fields] == ["country"]  # main untouched
    project.run("p", full_refresh=True)
    table = project.table("p")
    assert [f.name for f in table.spec().fields] == ["ts_month"]
    assert_partitions_exact(table)


def test_partition_by_errors_are_coded(project):
    project.pipeline("bad", "-- @merge_strategy: append_only\n-- @partition_by: bucket(id)")
    project.land(_part_rows(0), PARTS)
    result = project.run("bad", ok=False)
    assert result.error["code"] == "RAT-CFG-005"
    project.pipeline("bad", "-- @merge_strategy: append_only\n-- @partition_by: day(country)")
    result = project.run("bad", ok=False)
    assert result.error["code"] == "RAT-WRT-007"
    project.pipeline("bad", "-- @merge_strategy: append_only\n-- @partition_by: nope")
    result = project.run("bad", ok=False)
    assert result.error["code"] == "RAT-WRT-007" and "nope" in result.error["message"]


# ------------------------------------------------------------------------------------------ schema evolution


def test_added_columns_and_widening_evolve_the_table(project):
    project.pipeline("t", """
        -- @merge_strategy: incremental
        -- @unique_key: k
    """)
    narrow = pa.schema([("k", pa.int32()), ("f", pa.float32()), ("m", pa.decimal128(10, 2))])
    project.land([{"k": 1, "f": 1.5, "m": Decimal("1.25")}], narrow)
    project.run("t")
    wide = pa.schema([("k", pa.int64()), ("f", pa.float64()), ("m", pa.decimal128(14, 2)), ("extra", pa.string())])
    project.land([{"k": 2**40, "f": 1e300, "m": Decimal("123456789012.34"), "extra": "e"}], wide)
    result = project.run("t")
    types = {f.name: str(f.field_type) for f in project.table("t").schema().fields}
    assert types == {"k": "long", "f": "double", "m": "decimal(14, 2)", "extra": "string"}
    assert sorted(result.write["schema_changes"]) == [
        "add extra string", "widen f float -> double", "widen k int -> long",
        "widen m decimal(10, 2) -> decimal(14, 2)"]
    assert by(project.rows("t"), "k", "f", "m", "extra") == [
        (1, 1.5, Decimal("1.25"), None), (2**40, 1e300, Decimal("123456789012.34"), "e")]
    # a narrower result later fits the widened columns as it is
    project.land([{"k": 1, "f": 2.5, "m": Decimal("2.00")}], narrow)
    project.run("t")
    assert by(project.rows("t"), "k", "f") == [(1, 2.5), (2**40, 1e300)]


def assert_files_carry_the_table_ids(table) -> None:
    """Every data file names its columns as the table does, each with the table's field id: what PyIceberg (and any
    Iceberg reader) matches columns by after a rename or a widening."""
    wanted = [(f.name, str(f.field_id).encode()) for f in table.schema().fields]
    for task in table.scan().plan_files():
        schema = pq.read_schema(task.file.file_path)
        found = [(f.name, (f.metadata or {}).get(b"PARQUET:field_id")) for f in schema]
        assert [w for w in wanted if w[0] in schema.names] == found, task.file.file_path


@pytest.mark.parametrize("strategy", ["append_only", "incremental", "full_refresh"])
def test_a_result_cast_renamed_and_missing_columns_is_written_with_the_table_ids(project, strategy):
    """A later result whose columns differ from the table's in case, width and number is cast and renamed into the
    table's columns (a missing one is NULL; a full refresh drops it), and every file written carries the table's
    field ids."""
    project.pipeline("t", f"""
        -- @merge_strategy: {strategy}
        -- @unique_key: k
    """)
    project.land([{"k": 1, "Name": "a", "extra": 1.5}],
                 pa.schema([("k", pa.int64()), ("Name", pa.string()), ("extra", pa.float64())]))
    project.run("t")
    project.land([{"K": 2, "name": "b"}], pa.schema([("K", pa.int32()), ("name", pa.string())]))
    project.run("t")
    table = project.table("t")
    columns = [(f.name, str(f.field_type)) for f in table.schema().fields]
    if strategy == "full_refresh":
        assert columns == [("k", "long"), ("Name", "string")]
        assert by(project.rows("t"), "k", "Name") == [(2, "b")]
    else:
        assert columns == [("k", "long"), ("Name", "string"), ("extra", "double")]
        assert by(project.rows("t"), "k", "Name", "extra") == [(1, "a", 1.5), (2, "b", None)]
    assert_files_carry_the_table_ids(table)


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.float64(), pa.decimal128(12, 4)])
def test_incompatible_type_change_is_a_coded_error_and_main_is_untouched(project, arrow_type):
    project.pipeline("t", """
        -- @merge_strategy: delete_insert
        -- @unique_key: k
    """)
    project.land([{"k": 1, "m": None}], pa.schema([("k", pa.int64()), ("m", pa.decimal128(12, 2))]))
    project.run("t")
    before = project.table("t").metadata_location
    project.land([{"k": 2, "m": None}], pa.schema([("k", pa.int64()), ("m", arrow_type)]))
    result = project.run("t", ok=False)
    assert result.status == "failed" and result.error["code"] == "RAT-WRT-003"
    assert project.table("t").metadata_location == before


def test_dropping_a_unique_key_column_is_a_coded_error(project):
    project.pipeline("t", """
        -- @merge_strategy: scd2
        -- @unique_key: k
    """)
    project.land([{"k": 1, "v": "a", "w": 1}], KV)
    project.run("t")
    before = project.table("t").metadata_location
    project.land([{"v": "a"}], pa.schema([("v", pa.string())]))
    result = project.run("t", ok=False)
    assert result.error["code"] == "RAT-WRT-001"
    assert project.table("t").metadata_location == before


def test_schema_change_lives_on_the_branch_until_the_quality_gate_passes(project):
    project.pipeline("t", "-- @merge_strategy: append_only", tests={"no_extra": "SELECT 1 WHERE false\n"})
    project.land([{"k": 1}], pa.schema([("k", pa.int32())]))
    project.run("t")
    project.pipeline("t", "-- @merge_strategy: append_only",
                     tests={"no_extra": "SELECT * FROM {{ this }} WHERE extra = 'bad'\n"})
    project.land([{"k": 2**40, "extra": "bad"}], pa.schema([("k", pa.int64()), ("extra", pa.string())]))
    result = project.run("t", ok=False)
    assert result.error["code"] == "RAT-RUN-003"
    assert {f.name: str(f.field_type) for f in project.table("t").schema().fields} == {"k": "int"}
    assert project.rows("t") == [{"k": 1}]


@pytest.mark.parametrize("partitioned", [False, True])
def test_large_rewrites_keep_their_files_layout_without_a_shuffle(spark, project, monkeypatch, partitioned):
    """Past KEEP_LAYOUT_MIN_ROWS rewritten rows, survivors stay one file per old file; new rows come apart."""
    import ratui.engine.write.row_replacement as row_replacement

    monkeypatch.setattr(row_replacement, "KEEP_LAYOUT_MIN_ROWS", 0)
    schema = "k long, v string, g string"
    extra = {"partition_by": ("g",)} if partitioned else {}
    for i in range(4):
        rows = [(k, f"v{k}", f"g{i}") for k in range(i * 100, i * 100 + 100)]
        direct(spark, project, "inc", "append_only", rows, schema, **extra)
    out = direct(spark, project, "inc", "incremental", [(5, "x", "g0"), (150, "y", "g1"), (1000, "z", "g9")],
                 schema, unique_key="k", merge_on_read=False, **extra)
    # survivors: one file per rewritten file; new rows: one range file, or one file per partition (g0, g1, g9)
    assert (out.files_rewritten, out.files_kept, out.files_added) == (2, 2, 3 if not partitioned else 5)
    files = [t.file for t in project.table("inc").scan().plan_files()]
    rows = project.rows("inc")
    assert len(rows) == 401 and {r["k"]: r["v"] for r in rows if r["k"] in (5, 150, 1000)} == \
        {5: "x", 150: "y", 1000: "z"}
    survivors = sorted(f.record_count for f in files if f.record_count == 99)
    assert survivors == [99, 99]  # each rewritten file came back as one file without its updated row
    if partitioned:
        assert_partitions_exact(project.table("inc"))
    for i in range(3):  # scd2 the same way
        direct(spark, project, "dim", "scd2", [(k, "same", f"g{i}") for k in range(i * 100, i * 100 + 100)],
               schema, unique_key="k", run_started_at=T0, **extra)
    out = direct(spark, project, "dim", "scd2", [(5, "new", "g0"), (6, "same", "g0"), (250, "new", "g2")],
                 schema, unique_key="k", run_started_at=T0 + timedelta(days=1), merge_on_read=False, **extra)
    assert (out.rows_written, out.files_rewritten, out.files_kept) == (2, 2, 1)
    rows = project.rows("dim")
    assert len(rows) == 302
    assert by([r for r in rows if r["k"] in (5, 250)], "k", "v", "valid_to") == [
        (5, "new", None), (5, "same", T0 + timedelta(days=1)), (250, "new", None),
        (250, "same", T0 + timedelta(days=1))]


# ------------------------------------------------------------------------------------------- small batches


def test_a_small_batch_on_the_driver_gives_the_key_ranges_spark_computes(spark, project):
    """A small batch's count and key ranges are computed from its rows on the driver (no job): for every prunable
    key type, NULLs and an all-NULL column, they equal what Spark's own aggregate gives, so files_in_ranges picks
    the same files either way."""
    from ratui.engine.write.pruning import arrow_ranges, batch_ranges, small_batch

    schema = ("i int, l long, s string, d decimal(12,2), dt date, ts timestamp, ntz timestamp_ntz, none long, "
              "v string")
    rows = [(3, 2**40, "b\u00fc", Decimal("-1.50"), datetime(2026, 3, 1).date(), datetime(2026, 3, 1, 9, 30, 0, 123456,
             tzinfo=UTC), datetime(2026, 3, 1, 9, 30), None, "x"),
            (None, -5, "a'\\", Decimal("7.25"), datetime(1969, 12, 31).date(), datetime(1960, 1, 1, tzinfo=UTC),
             datetime(2030, 1, 1), None, "y"),
            (-7, None, None, None, None, None, None, None, "z")]
    direct(spark, project, "types", "append_only", rows, schema)
    table = project.table("types")
    cols = ["i", "l", "s", "d", "dt", "ts", "ntz", "none"]
    batch = spark.createDataFrame(rows, schema)
    local = small_batch(batch, 10)
    assert local is not None and small_batch(batch, 2) is None
    assert arrow_ranges(table, local, cols) == batch_ranges(table, batch, cols)


def test_merges_by_string_keys_spark_would_read_differently_in_sql_text(spark, project):
    """The table's key columns are filtered by the batch's key values written as SQL text; values that text could
    change (quotes, backslashes, `${...}`) go through Spark's own literals. Every key lands exactly once."""
    from ratui.engine.iceberg.read import read_table

    keys = ["plain", "it's", "back\\slash", "${spark.app.name}", "\u00fcn\u00efcode", "", "tab\there", "o'\\'k"]
    filler = [f"f{i:03}" for i in range(100)]  # files large enough for the rows to be located (merge-on-read)
    for part in (keys[:4] + filler[:50], keys[4:] + filler[50:]):  # two data files
        direct(spark, project, "sk", "append_only", [(k, "old") for k in part], "k string, v string")
    batches = ([("back\\slash", "new"), ("${spark.app.name}", "new")], [("it's", "new")],
               [(k, "newer") for k in keys[4:6]] + [("fresh", "new")])
    for batch in batches:
        direct(spark, project, "sk", "incremental", batch, "k string, v string", unique_key="k")
    expected = {"plain": "old", "it's": "new", "back\\slash": "new", "${spark.app.name}": "new",
                "\u00fcn\u00efcode": "newer", "": "newer", "tab\there": "old", "o'\\'k": "old", "fresh": "new",
                **{f: "old" for f in filler}}
    for rows in (project.rows("sk"), [r.asDict() for r in read_table(spark, project.table("sk")).collect()]):
        assert sorted((r["k"], r["v"]) for r in rows) == sorted(expected.items())



def test_a_batch_of_many_keys_locates_its_rows_through_its_key_range(spark, project):
    """More distinct keys than an IN list holds (1,000): the table's key column is filtered on the batch's key range
    before the exact match (a NULL key too). The rows it replaces are found exactly: deletes name them, every other
    row stays."""
    from ratui.engine.iceberg.read import read_table

    base = [(k, "old") for k in range(20_000)] + [(None, "old-null")]
    direct(spark, project, "many", "append_only", base, "k long, v string")
    batch = [(k, "new") for k in range(5_000, 6_500)] + [(None, "new-null"), (30_000, "fresh")]
    out = direct(spark, project, "many", "incremental", batch, "k long, v string", unique_key="k")
    assert out.delete_files_added == 1 and out.rows_deleted_by_position == 1_501 and out.files_rewritten == 0
    expected = {k: "new" if 5_000 <= k < 6_500 else "old" for k in range(20_000)} | {None: "new-null", 30_000: "fresh"}
    for rows in (project.rows("many"), [r.asDict() for r in read_table(spark, project.table("many")).collect()]):
        assert len(rows) == len(expected) and {r["k"]: r["v"] for r in rows} == expected


def test_a_small_batch_reaches_only_the_files_whose_bounds_hold_one_of_its_key_tuples(spark, project):
    """Candidate files of a batch on the driver, from Iceberg's per-file bounds (every key column, NULL counts)
    against each of its key tuples: a batch at both ends of the key range reaches the two end files, not the ones
    between; a tuple whose columns each fit some file but no file both reaches none; a NULL key reaches the files
    holding NULLs. Timestamps, dates, decimals and strings compare as the bounds encode them."""
    from ratui.engine.write.pruning import arrow_candidates, small_batch

    schema = "k long, g string, ts timestamp, dt date, d decimal(12,2)"
    for i in range(4):
        day = datetime(2026, 1, 1 + i * 5, tzinfo=UTC)
        rows = [(k, f"g{i}", day + timedelta(minutes=k), (day + timedelta(days=k % 3)).date(),
                 Decimal(f"{i}.{k % 100:02}")) for k in range(i * 100, i * 100 + 100)]
        if i == 3:
            rows.append((None, "g3", None, None, None))
        direct(spark, project, "ends", "append_only", rows, schema)
    table = project.table("ends")
    files = sorted((t.file for t in table.scan().plan_files()), key=lambda f: f.record_count)
    by_group = {}
    for f in files:
        by_group[pq.read_table(f.file_path, columns=["g"]).column(0)[0].as_py()] = f.file_path

    def reached(rows, cols):
        local = small_batch(spark.createDataFrame(rows, schema).select(*cols), 100)
        return sorted(by_group_of[f.file_path] for f in arrow_candidates(table, files, local, cols))

    by_group_of = {path: g for g, path in by_group.items()}
    first, last = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 16, tzinfo=UTC)
    assert reached([(5, "g0", None, None, None), (350, "g3", None, None, None)], ["k", "g"]) == ["g0", "g3"]
    assert reached([(5, "g3", None, None, None)], ["k", "g"]) == []
    assert reached([(None, "g3", None, None, None)], ["k", "g"]) == ["g3"]
    assert reached([(None, "g0", None, None, None)], ["k", "g"]) == []
    assert reached([(0, "x", first + timedelta(minutes=1), None, None)], ["ts"]) == ["g0"]
    assert reached([(0, "x", last + timedelta(minutes=399), None, None)], ["ts"]) == ["g3"]
    assert reached([(0, "x", None, (last + timedelta(days=2)).date(), None)], ["dt"]) == ["g3"]
    assert reached([(0, "x", None, None, Decimal("1.50")), (0, "x", None, None, Decimal("2.99"))], ["d"]) == \
        ["g1", "g2"]
    assert reached([(0, "x", None, None, Decimal("4.00"))], ["d"]) == []
