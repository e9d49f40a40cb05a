"""Data files near a target size: a large write lands as many files of about the target size (not one file per
Spark task), keyed tables stay clustered by key across those files, and the size is set per pipeline
(`target_file_size`) or by the table's own write.target-file-size-bytes. Small tables with a small target force
several files."""

from __future__ import annotations

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.iceberg.read import data_files, row_count
from ratui.engine.project.config import resolve_config
from ratui.engine.write.files import TARGET_FILE_PROPERTY
from tests.engine.write.test_strategies import Project, direct

KV = "k long, v string"


@pytest.fixture
def project(spark, tmp_path):
    p = Project(tmp_path / "proj")
    yield p
    p.close()


def rows(n: int, start: int = 0) -> list[tuple]:
    return [(k, f"value-{k:08d}") for k in range(start, start + n)]


def test_a_full_refresh_lands_as_files_of_about_the_target_size(spark, project):
    # one Spark task holds every row (direct() coalesces to one partition): without a target it is one file
    target = 40_000
    out = direct(spark, project, "t", "full_refresh", rows(20_000), KV, target_file_size=target)
    table = project.table("t")
    files = data_files(table)
    assert out.files_added == len(files) >= 4 and row_count(table) == 20_000
    # the first write had no files to learn from: its estimate errs on the small side, never past the target
    assert max(f.file_size_in_bytes for f in files) <= 1.2 * target
    # the next write learns the table's own bytes per row: its files are near the target
    direct(spark, project, "t", "full_refresh", rows(20_000, 5), KV, target_file_size=target)
    files = data_files(project.table("t"))
    whole = [f for f in files if f.record_count == max(g.record_count for g in files)]
    assert all(0.7 * target <= f.file_size_in_bytes <= 1.3 * target for f in whole), \
        [f.file_size_in_bytes for f in files]
    assert sum(f.record_count for f in files) == 20_000


def test_keyed_tables_are_split_into_disjoint_key_ranges_at_the_target_size(spark, project):
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import LongType

    out = direct(spark, project, "inc", "incremental", rows(20_000)[::-1], KV, unique_key="k",
                 target_file_size=40_000)
    files = data_files(project.table("inc"))
    assert out.files_added == len(files) >= 4
    fid = project.table("inc").schema().find_field("k").field_id
    bounds = sorted((from_bytes(LongType(), f.lower_bounds[fid]), from_bytes(LongType(), f.upper_bounds[fid]))
                    for f in files)
    assert all(a[1] < b[0] for a, b in zip(bounds, bounds[1:]))  # each file covers its own key range
    assert bounds[0][0] == 0 and bounds[-1][1] == 19_999


def test_a_first_scd2_write_is_laid_out_as_the_same_rows_without_its_validity_columns(spark, project):
    # valid_from is the run's instant and valid_to NULL in every row of a first scd2 write: Parquet keeps them in a
    # few bytes a file, so they do not make the first write's files smaller (more of them) than the target needs
    direct(spark, project, "inc", "incremental", rows(20_000), KV, unique_key="k", target_file_size=40_000)
    direct(spark, project, "hist", "scd2", rows(20_000), KV, unique_key="k", target_file_size=40_000)
    incremental, scd2 = data_files(project.table("inc")), data_files(project.table("hist"))
    assert len(scd2) == len(incremental) >= 4, ([f.record_count for f in scd2], [f.record_count for f in incremental])
    assert max(f.file_size_in_bytes for f in scd2) <= 1.2 * 40_000
    assert sum(f.record_count for f in scd2) == 20_000


def test_the_pipeline_size_is_recorded_as_the_tables_iceberg_property_and_used_without_it(spark, project):
    direct(spark, project, "t", "full_refresh", rows(20_000), KV, target_file_size=40_000)
    table = project.table("t")
    assert table.properties[TARGET_FILE_PROPERTY] == "40000"
    # a later write that does not set it: the table's property decides (another engine's setting would too);
    # the property has a floor of 1 MB, so this write is one file
    out = direct(spark, project, "t", "full_refresh", rows(20_000), KV)
    assert out.files_added == 1 and project.table("t").properties[TARGET_FILE_PROPERTY] == "40000"


@pytest.mark.parametrize("text, size", [("128MB", 128 * 2**20), ("256 mib", 256 * 2**20), ("1GB", 2**30),
                                        ("1.5GB", int(1.5 * 2**30)), ("67108864", 64 * 2**20)])
def test_target_file_size_is_read_from_config_yaml_and_annotations(tmp_path, text, size):
    pipeline, config = tmp_path / "pipeline.sql", tmp_path / "config.yaml"
    config.write_text(f"target_file_size: {text}\n")
    assert resolve_config(pipeline, "SELECT 1 AS id\n", config).target_file_size == size
    config.write_text("")
    text_sql = f"-- @target_file_size: {text}\nSELECT 1 AS id\n"
    assert resolve_config(pipeline, text_sql, config).target_file_size == size
    assert resolve_config(pipeline, "SELECT 1 AS id\n", config).target_file_size is None


@pytest.mark.parametrize("text", ["tiny", "12KB", "0", "-5MB", "128 TB"])
def test_a_bad_target_file_size_is_a_coded_error(tmp_path, text):
    pipeline, config = tmp_path / "pipeline.sql", tmp_path / "config.yaml"
    config.write_text(f"target_file_size: {text}\n")
    with pytest.raises(RatuiError) as err:
        resolve_config(pipeline, "SELECT 1 AS id\n", config)
    assert err.value.code == "RAT-CFG-005" and "target_file_size" in err.value.message


def test_a_keyed_first_write_keeps_the_latest_row_of_each_key_across_its_key_ranges(spark, project):
    """A keyed table's first write (scd2, or a --full-refresh of a keyed pipeline) removes duplicate keys as it
    range-partitions the rows by key, one shuffle for both: written as several files, each key keeps one row, the
    greatest watermark's, a NULL watermark losing and a tie going to the row later in the batch, as the
    incremental strategy's first write (duplicates removed before it clusters) keeps."""
    batch = [(k, f"first-{k}", 1) for k in range(6000)]
    batch += [(k, f"later-{k}", 2) for k in range(0, 6000, 3)]  # a greater watermark: wins
    batch += [(k, f"null-{k}", None) for k in range(1, 6000, 3)]  # a NULL watermark: loses
    batch += [(k, f"tie-{k}", 1) for k in range(2, 6000, 3)]  # the same watermark, later in the batch: wins
    expected = sorted((k, f"later-{k}" if k % 3 == 0 else f"first-{k}" if k % 3 == 1 else f"tie-{k}")
                      for k in range(6000))
    schema = "k long, v string, w long"
    keyed = {"unique_key": "k", "watermark_column": "w", "target_file_size": 20_000}
    direct(spark, project, "hist", "scd2", batch, schema, **keyed)
    direct(spark, project, "rebuilt", "full_refresh", batch, schema, merge_strategy="incremental", **keyed)
    direct(spark, project, "inc", "incremental", batch, schema, **keyed)
    for name in ("hist", "rebuilt", "inc"):
        assert len(data_files(project.table(name))) >= 3, name  # several key ranges, each a file
        assert sorted((r["k"], r["v"]) for r in project.rows(name)) == expected, name


def test_a_partitioned_keyed_first_write_keeps_disjoint_key_ranges_in_each_partition(spark, project):
    """A partitioned keyed table's first write, duplicates in its batch: each partition's files cover disjoint key
    ranges, and each key keeps one row (the later one in the batch)."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import LongType

    batch = [(k, f"v{k}", k % 2) for k in range(6000)] + [(k, f"w{k}", k % 2) for k in range(0, 6000, 2)]
    direct(spark, project, "hist", "scd2", batch, "k long, v string, p long", unique_key="k",
           target_file_size=20_000, partition_by=("p",))
    table = project.table("hist")
    fid = table.schema().find_field("k").field_id
    by_partition: dict = {}
    for f in data_files(table):
        by_partition.setdefault(tuple(f.partition), []).append(
            (from_bytes(LongType(), f.lower_bounds[fid]), from_bytes(LongType(), f.upper_bounds[fid])))
    assert len(by_partition) == 2 and sum(len(b) for b in by_partition.values()) >= 4, by_partition
    for bounds in by_partition.values():
        bounds.sort()
        assert all(a[1] < b[0] for a, b in zip(bounds, bounds[1:])), bounds  # each file its own key range
    assert sorted((r["k"], r["v"]) for r in project.rows("hist")) == sorted(
        (k, f"w{k}" if k % 2 == 0 else f"v{k}") for k in range(6000))
