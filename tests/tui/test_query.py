"""The Query screen and the table view: pilot tests on real Spark and real tables (run, page, count, errors that
move the cursor, completion, history, export, cancel), and snapshots at 80x24 and 120x40 from a controller whose
data reads are fixed (real snapshot ids and times are random)."""

from __future__ import annotations

import asyncio
import functools
from datetime import date
from decimal import Decimal

import pytest

from ratui.console.controller import Controller
from ratui.console.data import PAGE_SIZE, QueryPage
from ratui.engine.iceberg.describe import Column, ColumnStats, PartitionField, SnapshotEntry, TableDescription

from .conftest import make_app, screen_text, settle, wait_for
from .test_snapshots import snap

ROWS = 450  # two full pages and a short one

NUMBERS = f"""\
-- @merge_strategy: full_refresh
SELECT CAST(id AS BIGINT) AS id, CAST(id % 3 AS INT) AS bucket, concat('row ', CAST(id AS STRING)) AS label
FROM range(1, {ROWS + 1})
"""


# ------------------------------------------------------------------------------------- real Spark, pilot


def pilot_test(fn):
    """An async pilot test, run to its end by asyncio (the suite has no async plugin)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        asyncio.run(fn(*args, **kwargs))

    return run


@pytest.fixture(scope="module")
def project(tmp_path_factory, spark):
    from ratui.engine.facade.engine import Engine
    from tests.conftest import write_files

    root = tmp_path_factory.mktemp("tuiquery") / "proj"
    write_files(root, {"ratui.yaml": "namespace: demo\n",
                       "demo/pipelines/silver/numbers/pipeline.sql": NUMBERS,
                       "demo/pipelines/silver/numbers_copy/pipeline.sql":
                           "-- @merge_strategy: full_refresh\nSELECT * FROM {{ ref('silver.numbers') }}\n"})
    engine = Engine.open(root)
    assert [r.status for r in engine.run(engine.compile().select([]))] == ["success", "success"]
    engine.close()
    return root


async def open_query(pilot):
    await settle(pilot)
    await pilot.press("7")
    await settle(pilot)
    screen = pilot.app.screen
    await wait_for(pilot, lambda: bool(screen.tables))
    return screen


async def run_sql(pilot, screen, sql: str):
    editor = screen.query_one("#query-editor")
    editor.text = sql
    editor.focus()
    await pilot.press("ctrl+j")
    await wait_for(pilot, lambda: not screen.running)
    await settle(pilot)


@pilot_test
async def test_run_page_and_count(project):
    app = make_app(project, spark_state="ready")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_query(pilot)
        await run_sql(pilot, screen, "SELECT id, label\nFROM silver.numbers\nORDER BY id")
        table = screen.query_one("#query-results")
        assert [str(c.label) for c in table.columns.values()] == ["id", "label"]
        assert table.row_count == PAGE_SIZE
        await wait_for(pilot, lambda: screen.page.count is not None)
        assert f"rows 1-{PAGE_SIZE} of {ROWS}" in screen_text(app)
        table.focus()
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.page.offset == PAGE_SIZE and not screen.running)
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.page.offset == 2 * PAGE_SIZE and not screen.running)
        await settle(pilot)
        assert table.row_count == ROWS - 2 * PAGE_SIZE
        assert str(table.get_row_at(0)[0]) == str(2 * PAGE_SIZE + 1)
        assert not screen.page.more
        assert f"rows {2 * PAGE_SIZE + 1}-{ROWS} of {ROWS}" in screen_text(app)
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.page.offset == PAGE_SIZE and not screen.running)


@pilot_test
async def test_an_error_shows_its_code_and_puts_the_cursor_on_its_line(project):
    app = make_app(project, spark_state="ready")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_query(pilot)
        await run_sql(pilot, screen, "SELECT id\nFROM silver.numbers\nWHERE nope > 1")
        text = screen_text(app)
        assert "RAT-SQL-004" in text and "line 3" in text
        editor = screen.query_one("#query-editor")
        assert editor.cursor_location == (2, 6)  # `nope` on the third line
        assert screen.query_one("#query-results").row_count == 0
        assert not app.crashes


@pilot_test
async def test_tab_completes_table_names_and_history_recalls_queries(project):
    app = make_app(project, spark_state="ready")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_query(pilot)
        editor = screen.query_one("#query-editor")
        editor.focus()
        await pilot.press(*"select * from sil", "tab")
        await settle(pilot)
        assert editor.text == "select * from silver.numbers"  # as far as the two tables agree
        assert "silver.numbers_copy" in screen_text(app)  # both listed
        await pilot.press("_", "tab")
        assert editor.text == "select * from silver.numbers_copy"
        await pilot.press("ctrl+j")
        await wait_for(pilot, lambda: not screen.running and screen.page is not None)
        await run_sql(pilot, screen, "SELECT count(*) AS n FROM silver.numbers")
        assert str(screen.query_one("#query-results").get_row_at(0)[0]) == str(ROWS)
        editor.text = "draft"
        editor.focus()
        await pilot.press("ctrl+up")
        assert editor.text == "SELECT count(*) AS n FROM silver.numbers"
        await pilot.press("ctrl+up")
        assert editor.text == "select * from silver.numbers_copy"
        await pilot.press("ctrl+down", "ctrl+down")
        assert editor.text == "draft"
    history = (project / ".ratui" / "query_history.jsonl").read_text()
    assert "numbers_copy" in history and "count(*)" in history  # kept for the next session


@pilot_test
async def test_export_writes_the_whole_result(project):
    app = make_app(project, spark_state="ready")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_query(pilot)
        await run_sql(pilot, screen, "SELECT id FROM silver.numbers")
        await pilot.press("ctrl+s")
        await settle(pilot)
        field = app.screen.query_one("#export-input")
        field.value = "exports/all.csv"
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Exported" in n for n in app.notices))
    lines = (project / "exports" / "all.csv").read_text().splitlines()
    assert lines[0] == "id" and len(lines) == ROWS + 1  # every row, not the page shown


@pilot_test
async def test_escape_stops_a_running_query(project):
    app = make_app(project, spark_state="ready")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_query(pilot)
        editor = screen.query_one("#query-editor")
        editor.text = "SELECT sum(hash(id)) FROM range(0, 3000000000)"
        await pilot.press("ctrl+j")
        # while it runs, Spark's own progress of its job: tasks done of the total
        await wait_for(pilot, lambda: "tasks" in screen_text(app), timeout=60)
        assert screen.running and "0/2 tasks" in screen_text(app)  # range()'s two partitions, none done yet
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.running, timeout=60)
        await settle(pilot)
        assert "RAT-QRY-004" in screen_text(app)
        await run_sql(pilot, screen, "SELECT 1 AS one")  # Spark is still usable
        assert str(screen.query_one("#query-results").get_row_at(0)[0]) == "1"


@pilot_test
async def test_table_view_from_the_query_screen(project):
    app = make_app(project, spark_state="ready")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_query(pilot)
        editor = screen.query_one("#query-editor")
        editor.text = "SELECT * FROM silver.numbers"
        editor.move_cursor((0, 18))
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: getattr(app.screen, "description", None) is not None)
        await settle(pilot)
        text = screen_text(app)
        assert "silver.numbers @ main" in text and f"{ROWS} rows" in text
        assert "bucket" in text and "long" in text  # the schema
        await pilot.press("c")
        await settle(pilot)
        assert str(ROWS) in screen_text(app)  # id's maximum, from the files' bounds
        await pilot.press("p")
        await wait_for(pilot, lambda: app.screen.query_one("#table-preview").row_count > 0)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen


@pilot_test
async def test_escape_leaves_the_editor_so_the_screen_keys_work_again(seeded):
    app = make_app(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("7")
        await settle(pilot)
        editor = app.screen.query_one("#query-editor")
        assert editor.has_focus
        await pilot.press("2")  # typed: the editor has the keys
        assert editor.text == "2" and app.current_mode == "query"
        await pilot.press("escape", "2")
        await settle(pilot)
        assert app.current_mode == "runs"


@pilot_test
async def test_t_on_a_pipeline_never_run_says_there_is_no_table_yet(seeded):
    app = make_app(seeded)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("t")  # on Pipelines: the selected pipeline's table
        await settle(pilot)
        text = screen_text(app)
        assert "RAT-CAT-005" in text and "raw_customers" in text and "Run the pipeline" in text
        await pilot.press("escape")
        await settle(pilot)
        assert app.current_mode == "pipelines" and len(app.screen_stack) == 1
        assert not app.crashes


# ------------------------------------------------------------------------------------------ snapshots


class FixedData(Controller):
    """The real console for everything but the data reads, which return fixed tables, pages and metadata."""

    KEYS = ["ecommerce.bronze.raw_customers", "ecommerce.bronze.raw_orders", "ecommerce.silver.clean_orders",
            "ecommerce.gold.daily_revenue"]

    def query_refs(self):
        return ["main", "dev-revenue"]

    def table_names(self, ref="main"):
        return list(self.KEYS)

    def spark_started(self):
        return True

    def open_query(self, sql, ref, query_id):
        rows = [[d, Decimal(f"{1000 + 37.5 * d:.2f}"), 40 + d, None if d == 3 else "EU"] for d in range(1, 21)]
        return QueryPage(query_id, ref, ["day", "revenue", "orders", "region"],
                         ["int", "decimal(12,2)", "bigint", "string"], rows, 0, True, 12_400, 0.42)

    def describe_table(self, ref, key):
        return TableDescription(
            key=key, location="/projects/shop/ecommerce/warehouse/silver/clean_orders", format_version=2,
            snapshot_id=5512093311, rows=12_000, data_files=3, delete_files=1, size_bytes=1_234_567,
            columns=[Column(1, "order_id", "long", True), Column(2, "customer_id", "int", False),
                     Column(3, "amount", "decimal(12, 2)", False), Column(4, "order_date", "date", False)],
            partition_spec=[PartitionField("order_date", "month", "order_date_month", 1000)], sort_order=[],
            properties={},
            history=[SnapshotEntry(5512093311, 4411, 3, "2026-03-01T10:30:00.000+00:00", "overwrite",
                                   "260301103000beef01", "incremental", None, 400, 120, 1, 1, 12_000),
                     SnapshotEntry(4411, None, 1, "2026-02-28T09:00:00.000+00:00", "append", "260228090000aaaa01",
                                   "incremental", None, 11_720, 0, 2, 0, 11_720)],
            stats=[ColumnStats("order_id", "long", 1, 12_000, 0, 12_120, 48_000),
                   ColumnStats("customer_id", "int", 1, 5000, 0, 12_120, 30_000),
                   ColumnStats("amount", "decimal(12, 2)", Decimal("2.76"), Decimal("4449.30"), 12, 12_120, 52_000),
                   ColumnStats("order_date", "date", date(2026, 1, 1), date(2026, 3, 31), 0, 12_120, 9_000)],
            approximate=True)


def fixed_app(root):
    return make_app(root, controller=FixedData(root))


def type_query(app):
    editor = app.screen.query_one("#query-editor")
    editor.text = "SELECT order_date AS day, sum(amount) AS revenue,\n       count(*) AS orders, region\n" \
                  "FROM silver.clean_orders\nGROUP BY 1, 4"


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["large", "80x24"])
def test_query_screen_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, fixed_app(seeded), ("7",), type_query, ("ctrl+j",), size=size)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["large", "80x24"])
def test_table_view_snapshot(snap_compare, seeded, size):
    def open_table(app):
        app.screen.open_table("ecommerce.silver.clean_orders")

    assert snap(snap_compare, fixed_app(seeded), ("7",), open_table, size=size)


def test_table_view_columns_snapshot(snap_compare, seeded):
    def open_table(app):
        app.screen.open_table("ecommerce.silver.clean_orders")

    assert snap(snap_compare, fixed_app(seeded), ("7",), open_table, ("c",), size=(80, 24))

