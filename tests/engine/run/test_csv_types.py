"""CSV column types found in Python (csv_types.py) against Spark's own inference and read of the same files.

Wherever csv_types gives an answer it must be the schema Spark infers, and reading the files with it must find no
malformed row (the landing reader then skips both Spark passes). Where it is unsure it says None, and Spark infers.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as hs

from ratui.engine.landing.formats.csv_types import csv_types

REPO = Path(__file__).resolve().parents[3]
LANDING = REPO / "sample_project" / "ecommerce" / "landing"

# values of the kinds csv_types answers for ...
CLEAN = {
    "int": ["0", "7", "-12", "+5", "00012", "2147483647", "-2147483648", "999999999"],
    "bigint": ["2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808"],
    "fraction": ["1.5", "-0.25", "+3.0", "0.000001", "12345678901234567.5"],
    "date": ["2023-12-22", "2024-02-29", "1000-01-01", "9999-12-31"],
    "timestamp": ["2026-01-04 11:05:21", "2026-01-04T11:05:21", "2026-01-04 11:05:21.123456", "2026-01-04 00:00:00.5",
                  "2024-02-29 23:59:59"],
    "boolean": ["true", "FALSE", "True", "tRuE"],
    "text": ["abc", "DE", "quinn.garcia1@post.example", "N/A", "null", "e5", "truex", "Tokyo", "t-shirt", "x 1"],
    "empty": [""],
}
# ... and of the kinds it must leave to Spark
TRICKY = {
    "wide": ["9223372036854775808", "123456789012345678901", "1234567890123456789.5"],
    "bad_date": ["2023-02-29", "0999-01-01", "2024-1-5", "2024-13-01"],
    "bad_timestamp": ["2026-01-04 24:00:00", "2026-01-04 23:59:60", "2026-01-04 11:05:21.1234567", "2026-01-04 11:05",
                      "2026-01-04 11:05:21Z", "2026-02-30 10:00:00"],
    "lookalike": ["NaN", "nan", "Inf", "-Inf", "Infinity", "T12:00:00", "T1", "T", "t", "1e5", "0x1p3", "1.", ".5",
                  "5d", "1,5"],
    "spaced": [" 5", "5 ", " abc", "2024-01-01 ", "\t7"],
    "odd": ['"quoted"', 'x"y', "a\\b", "\u0663", "\u00e9t\u00e9", "\u00a05"],
}
POOLS = {**CLEAN, **TRICKY}


def _spark_types(spark, paths: list[Path]) -> list[str]:
    schema = spark.read.options(header=True, inferSchema=True).csv([str(p) for p in paths]).schema
    return [f.dataType.simpleString() for f in schema.fields]


def _malformed_and_rows(spark, paths: list[Path], types: list[str], header: list[str]) -> tuple[int, int]:
    from pyspark.sql import functions as F

    ddl = ", ".join(f"`{name}` {kind}" for name, kind in zip(header, types)) + ", `_bad` string"
    df = (spark.read.options(header=True, mode="PERMISSIVE", columnNameOfCorruptRecord="_bad").schema(ddl)
          .csv([str(p) for p in paths]))
    # (Spark refuses a query that reads the corrupt column alone)
    row = df.groupBy().agg(F.count(F.col("_bad")).alias("bad"), F.count(F.lit(1)).alias("rows"),
                           F.count(F.col(f"`{header[0]}`")).alias("_")).first()
    return row["bad"], row["rows"]


def _write(folder: Path, header: list[str], files: list[list[list[str]]], blank_lines: bool) -> list[Path]:
    paths = []
    for i, rows in enumerate(files):
        lines = [",".join(header)] + [",".join(r) for r in rows]
        if blank_lines and len(lines) > 1:
            lines.insert(len(lines) // 2 + 1, "")
        path = folder / f"part_{i}.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


@hs.composite
def csv_files(draw):
    width = draw(hs.integers(1, 4))
    header = [f"c{i}" for i in range(width)]
    # half the files are of the kinds csv_types answers for (the shapes of real files), one or two kinds a column;
    # the other half mix in anything
    clean = draw(hs.booleans())
    column_pools = []
    for _ in range(width):
        kinds = draw(hs.lists(hs.sampled_from(sorted(CLEAN)), min_size=1, max_size=2, unique=True) if clean else
                     hs.lists(hs.sampled_from(sorted(POOLS)), min_size=1, max_size=3, unique=True))
        column_pools.append([v for k in kinds for v in POOLS[k]])
    n_files = draw(hs.integers(1, 3))
    files = []
    for _ in range(n_files):
        n_rows = draw(hs.integers(0, 12))
        files.append([[draw(hs.sampled_from(pool)) for pool in column_pools] for _ in range(n_rows)])
    return header, files, draw(hs.booleans())


def _check(spark, header: list[str], files: list[list[list[str]]], blank_lines: bool = False) -> list[str] | None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = _write(Path(tmp), header, files, blank_lines)
        found = csv_types(paths)
        if found is not None:
            assert found == _spark_types(spark, paths), files
            bad, rows = _malformed_and_rows(spark, paths, found, header)
            lines = sum(1 for f in files for r in f if ",".join(r))  # an empty line is no row
            assert (bad, rows) == (0, lines), files
        return found


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files())
@example(([f"c{i}" for i in range(3)], [[["1", "2023-12-22", "2026-01-04 11:05:21"]],
                                       [["2147483648", "2024-02-29", "2026-01-04T11:05:21.5"]]], True))
@example((["a", "b"], [[["1", "1.5"], ["", "7"]], [["+5", "true"]]], False))
@example((["a"], [[["2023-12-22"], ["2026-01-04 11:05:21"]]], False))  # dates and timestamps: Spark's call
def test_where_python_answers_it_is_sparks_answer_and_no_row_is_malformed(spark, case):
    header, files, blank_lines = case
    _check(spark, header, files, blank_lines)


@pytest.mark.parametrize("values, expected", [
    (["1", "-2", "+3"], "int"),
    (["1", "2147483648"], "bigint"),
    (["1", "2.5"], "double"),
    (["2023-12-22", ""], "date"),
    (["2026-01-04 11:05:21", "2026-01-04T11:05:21.25"], "timestamp"),
    (["true", "False"], "boolean"),
    (["1", "2023-12-22", "N/A"], "string"),
    (["", ""], "string"),
])
def test_the_plain_kinds_are_answered_in_python(spark, values, expected):
    """The shapes most landing files have get an answer (else the Spark passes run for them all), and it is
    Spark's."""
    assert _check(spark, ["v"], [[[v] for v in values]]) == [expected]


@pytest.mark.parametrize("values", [
    ["2023-12-22", "2026-01-04 11:05:21"],  # Spark's answer depends on the order of the rows
    ["1", "2023-12-22"],
    ["1e5"], ["NaN"], ["T12:00:00"], [" 5"], ["123456789012345678901"], ["2023-02-29"],
])
def test_what_spark_alone_can_answer_is_left_to_it(spark, values):
    assert _check(spark, ["v"], [[[v] for v in values]]) is None


def test_files_that_are_not_plain_are_left_to_spark(tmp_path):
    cases = {
        "quoted.csv": 'a,b\n1,"x, y"\n',
        "short_row.csv": "a,b\n1,2\n3\n",
        "crlf.csv": "a,b\r\n1,2\r\n",
        "header_again.csv": "a,b\n1,2\na,b\n3,4\n",
        "bom.csv": "\ufeffa,b\n1,2\n",
        "blank_line.csv": "a\n1\n   \n2\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_bytes(text.encode("utf-8"))
        assert csv_types([tmp_path / name]) is None, name
    (tmp_path / "other_header.csv").write_text("a,c\n1,2\n")
    (tmp_path / "plain.csv").write_text("a,b\n1,2\n")
    assert csv_types([tmp_path / "plain.csv", tmp_path / "other_header.csv"]) is None
    (tmp_path / "latin1.csv").write_bytes("a\ncaf\u00e9\n".encode("latin-1"))
    assert csv_types([tmp_path / "latin1.csv"]) is None


def test_the_sample_landing_files_are_typed_in_python(spark):
    """The sample's CSV zones are what a new user runs first: their types come without a Spark job, and are the
    ones Spark gives (a customer id is a number, a signup date a date, an update time a timestamp)."""
    customers = [LANDING / "customers" / "customers.csv"]
    assert csv_types(customers) == ["int", "string", "string", "string", "string", "date"]
    orders = sorted((LANDING / "orders").glob("orders_*.csv"))
    assert csv_types(orders) == ["int", "int", "int", "int", "double", "string", "date", "timestamp"]
    for paths in (customers, orders):
        assert csv_types(paths) == _spark_types(spark, paths)


def test_a_plain_csv_zone_is_read_without_a_spark_job_and_a_quoted_one_is_checked(spark, tmp_path):
    """The landing reader uses the Python answer: a plain zone's read runs no Spark job (neither inference nor the
    bad-row check), also when read again; a zone Python cannot vouch for is inferred and checked by Spark."""
    from ratui.engine.landing.reader import ZoneFile, ZoneReader

    tracker = spark.sparkContext.statusTracker()

    def jobs_of_read(name: str, text: str) -> tuple[int, list]:
        path = tmp_path / name / "part.csv"
        path.parent.mkdir()
        path.write_text(text)
        group = f"csv-types-{name}"
        spark.sparkContext.setJobGroup(group, group)
        try:
            reader = ZoneReader(spark, name, "csv", staging=tmp_path / "staging")
            df = reader.read([ZoneFile(path, path.name)])
            again = ZoneReader(spark, name, "csv", staging=tmp_path / "staging").read([ZoneFile(path, path.name)])
            assert again.schema == df.schema
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        return len(tracker.getJobIdsForGroup(group)), [f.dataType.simpleString() for f in df.schema.fields]

    assert jobs_of_read("plain", "id,name,day\n1,ann,2024-01-01\n2,bob,2024-01-02\n") == (0, ["int", "string",
                                                                                                 "date"])
    jobs, types = jobs_of_read("quoted", 'id,name,day\n1,"Smith, Ann",2024-01-01\n2,bob,2024-01-02\n')
    assert types == ["int", "string", "date"] and jobs >= 2  # Spark's inference, then the bad-row check
