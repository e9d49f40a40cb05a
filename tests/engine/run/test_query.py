"""Ad-hoc queries kept on Spark (the console's Query screen): pages, count, errors with their line, cancel,
export inside the project; and a table's description from its metadata (the table view). Real Spark, real
Iceberg tables, a real SQLite file."""

from __future__ import annotations

import csv
import threading
import time
from datetime import date

import pyarrow.parquet as pq
import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine

ROWS = 1234  # not a multiple of a page: the last page is short

NUMBERS = f"""\
-- @merge_strategy: full_refresh
SELECT CAST(id AS BIGINT) AS id, CAST(id % 7 AS INT) AS bucket,
       CASE WHEN id % 10 = 0 THEN NULL ELSE concat('n', CAST(id AS STRING)) END AS label,
       date_add(DATE '2026-01-01', CAST(id % 31 AS INT)) AS day
FROM range(1, {ROWS + 1})
"""


@pytest.fixture(scope="module")
def numbers(tmp_path_factory, spark):
    from tests.conftest import write_files

    root = tmp_path_factory.mktemp("query") / "proj"
    write_files(root, {"ratui.yaml": "namespace: demo\n", "demo/pipelines/silver/numbers/pipeline.sql": NUMBERS})
    engine = Engine.open(root)
    results = engine.run(engine.compile().select([]))
    assert [r.status for r in results] == ["success"]
    yield engine
    engine.close()


def test_pages_walk_the_whole_result_once(numbers):
    result = numbers.open_query("SELECT id FROM silver.numbers ORDER BY id")
    try:
        seen, offset, more = [], 0, True
        while more:
            rows, more = result.page(offset, 500)
            assert len(rows) <= 500
            seen.extend(r[0] for r in rows)
            offset += 500
        assert seen == list(range(1, ROWS + 1))
        assert result.known_count == ROWS  # the short last page told the count without a job
        assert result.columns == ["id"] and result.types == ["bigint"]
    finally:
        result.close()


def test_count_runs_in_its_own_job(numbers):
    result = numbers.open_query("SELECT * FROM demo.silver.numbers WHERE bucket = 3")
    try:
        first, more = result.page(0, 10)
        assert len(first) == 10 and more
        expected = sum(1 for i in range(1, ROWS + 1) if i % 7 == 3)
        assert result.count() == expected
    finally:
        result.close()


@pytest.mark.parametrize("sql, line, column", [
    ("SELECT nope\nFROM silver.numbers", 1, 7),
    ("SELECT *\nFROM silver.numbers\nWHER x", 3, 5),
    ("SELECT *\n  FROM silver.missing", 2, 7),
])
def test_errors_are_coded_and_point_at_the_line(numbers, sql, line, column):
    with pytest.raises(RatuiError) as caught:
        numbers.open_query(sql).page(0, 10)
    error = caught.value
    assert error.code == "RAT-SQL-004"
    assert (error.line, error.details["column"]) == (line, column)
    assert "silver.numbers" in error.hint  # the tables there are at the ref


def test_an_unknown_ref_is_refused(numbers):
    with pytest.raises(RatuiError) as caught:
        numbers.open_query("SELECT 1", ref="no-such-branch")
    assert caught.value.code == "RAT-CAT-002"


def test_cancel_interrupts_a_running_page(numbers):
    result = numbers.open_query(
        "SELECT sum(hash(id)) FROM range(0, 3000000000)")  # a long job: minutes on two cores
    outcome: list[BaseException] = []

    def fetch() -> None:
        try:
            result.page(0, 10)
        except BaseException as exc:  # noqa: BLE001 - what the console's worker would get
            outcome.append(exc)

    worker = threading.Thread(target=fetch)
    worker.start()
    from ratui.engine.spark import jobs  # the page's Spark job running (its job group is the query's id)

    deadline = time.monotonic() + 120
    while not (jobs.progress(result.query_id) or {}).get("jobs_running"):
        assert time.monotonic() < deadline and worker.is_alive(), outcome
        time.sleep(0.05)
    started = time.perf_counter()
    numbers.cancel_query(result.query_id)
    worker.join(60)
    assert not worker.is_alive()
    assert time.perf_counter() - started < 30
    assert outcome and isinstance(outcome[0], RatuiError) and outcome[0].code == "RAT-QRY-004"
    again = numbers.open_query("SELECT count(*) FROM silver.numbers")
    try:
        assert again.page(0, 1)[0] == [[ROWS]]
    finally:
        again.close()
        result.close()


def test_export_writes_the_whole_result_inside_the_project_only(numbers):
    root = numbers.root
    result = numbers.open_query("SELECT id, label, day FROM silver.numbers ORDER BY id")
    try:
        path = result.export(".ratui/exports/numbers.csv")
        assert path == (root / ".ratui/exports/numbers.csv").resolve()
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        assert rows[0] == ["id", "label", "day"]
        assert len(rows) == ROWS + 1
        assert rows[1] == ["1", "n1", "2026-01-02"] and rows[10][1] == ""  # id 10: NULL label
        parquet = result.export("exports/numbers.parquet")
        table = pq.read_table(parquet)
        assert table.num_rows == ROWS and table.column("day")[0].as_py() == date(2026, 1, 2)
        for target, code in [("/tmp/outside.csv", "RAT-QRY-002"), ("../outside.csv", "RAT-QRY-002"),
                             ("exports/numbers.parquet", "RAT-QRY-003"), ("numbers.txt", "RAT-QRY-001")]:
            with pytest.raises(RatuiError) as caught:
                result.export(target)
            assert caught.value.code == code, target
        outside = root.parent / "elsewhere"
        outside.mkdir(exist_ok=True)
        (root / "link").symlink_to(outside, target_is_directory=True)  # a folder in the project that leads out
        with pytest.raises(RatuiError) as caught:
            result.export("link/numbers.csv")
        assert caught.value.code == "RAT-QRY-002"
        assert not (root.parent / "outside.csv").exists() and not list(outside.iterdir())
        assert not list(root.glob("**/.*.part"))  # no staging folder left behind
    finally:
        result.close()


def test_describe_reads_schema_history_and_stats_from_metadata(numbers):
    d = numbers.describe_table("main", "demo.silver.numbers")
    assert [(c.field_id, c.name, c.type) for c in d.columns] == [
        (1, "id", "long"), (2, "bucket", "int"), (3, "label", "string"), (4, "day", "date")]
    assert d.rows == ROWS and d.data_files >= 1 and d.partition_spec == []
    stats = {s.name: s for s in d.stats}
    assert (stats["id"].minimum, stats["id"].maximum, stats["id"].nulls) == (1, ROWS, 0)
    assert stats["label"].nulls == ROWS // 10
    assert (stats["day"].minimum, stats["day"].maximum) == (date(2026, 1, 1), date(2026, 1, 31))
    newest = d.history[0]
    assert newest.snapshot_id == d.snapshot_id and newest.total_rows == ROWS
    run_ids = {r["id"] for r in numbers.runs(50) if r["status"] == "success"}
    assert all(s.run_id in run_ids for s in d.history)  # every snapshot names the run that made it
    assert all(s.strategy == "full_refresh" for s in d.history)
    columns, rows = numbers.preview_table("main", "demo.silver.numbers", 5)
    assert columns == ["id", "bucket", "label", "day"] and len(rows) == 5
