"""Column lineage in the console: from Lineage (`c`) and from a table's schema (`l`), a table's columns with their
sources and the selected column's path both ways; a Python pipeline said to be table-level only. Snapshots at
80x24 and 160x48. No Spark: the lineage is read from the SQL; the table the schema view shows is a real Iceberg
table written with PyIceberg."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ratui.screens.column_lineage import ColumnLineageScreen
from ratui.screens.lineage import LineageScreen
from ratui.screens.table_view import TableViewScreen

from .conftest import copy_sample, flat, make_app, run, screen_text, settle
from .seed import seed_history

NS = "ecommerce"
SMALL = (80, 24)
LARGE = (160, 48)


async def open_columns(pilot, key: str) -> ColumnLineageScreen:
    await settle(pilot)
    await pilot.press("8")
    await settle(pilot)
    assert isinstance(pilot.app.screen, LineageScreen)
    pilot.app.screen.select_key(key)
    await settle(pilot)
    await pilot.press("c")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, ColumnLineageScreen) and screen.key == key
    return screen


def test_lineage_c_lists_columns_and_a_column_path_reaches_the_landing_zone(seeded):
    async def go():
        app = make_app(seeded)
        async with app.run_test(size=LARGE) as pilot:
            screen = await open_columns(pilot, f"{NS}.gold.daily_revenue")
            text = flat(screen_text(app))
            assert "gold.daily_revenue SQL pipeline · reads silver.clean_orders, silver.product_catalog" in text
            assert "order_date copy silver.clean_orders.order_date" in text
            # the first column is selected and its path shown
            assert screen.column == "order_date" and "▲ where it comes from" in text
            await pilot.press("down", "down", "down", "down", "down")  # gross_revenue
            await settle(pilot)
            assert screen.column == "gross_revenue" and screen.path.origin.column == "gross_revenue"
            text = flat(screen_text(app))
            assert "└─ silver.clean_orders.amount derived" in text
            assert "landing.orders.quantity landing zone" in text and "landing.orders.unit_price landing zone" in text
            assert "nothing: no pipeline computes a column from it" in text
            # u follows the path upstream: clean_orders.amount, which feeds gold columns
            await pilot.press("u")
            await settle(pilot)
            up = app.screen
            assert isinstance(up, ColumnLineageScreen) and (up.key, up.column) == (f"{NS}.silver.clean_orders",
                                                                                   "amount")
            text = flat(screen_text(app))
            assert "gold.daily_revenue.gross_revenue derived" in text
            assert "gold.country_summary table-level" in text  # the Python pipeline reading the whole table
            await pilot.press("escape")
            await settle(pilot)
            assert app.screen is screen
            assert not app.crashes

    run(go())


def test_a_python_pipeline_says_its_lineage_is_table_level(seeded):
    async def go():
        app = make_app(seeded)
        async with app.run_test(size=SMALL) as pilot:
            await open_columns(pilot, f"{NS}.gold.country_summary")
            text = flat(screen_text(app))
            assert "Python pipeline · reads gold.customer_lifetime_value" in text
            assert "A Python pipeline's lineage is table-level only" in text
            assert not app.crashes

    run(go())


@pytest.fixture(scope="module")
def with_table(tmp_path_factory):
    """The sample with silver.clean_orders on main (a real Iceberg table, two of its columns)."""
    from ratui.engine.facade.engine import Engine

    root = copy_sample(tmp_path_factory.mktemp("column-lineage"))
    seed_history(root)
    engine = Engine.open(root)
    key = f"{NS}.silver.clean_orders"
    schema = pa.schema([("order_id", pa.int32()), ("amount", pa.decimal128(12, 2))])
    table = engine.state.catalog.create_table("main", key, schema, root / NS / "warehouse" / "silver" / "co")
    table.append(pa.table({"order_id": [1], "amount": [None]}, schema=schema))
    engine.state.catalog.record_commit("main", f"write {key}")
    engine.close()
    return root


def test_l_in_a_tables_schema_shows_the_selected_columns_path(with_table):
    async def go():
        app = make_app(with_table)
        async with app.run_test(size=LARGE) as pilot:
            await settle(pilot)
            app.push_screen(TableViewScreen(f"{NS}.silver.clean_orders", "main", origin="pipelines"))
            await settle(pilot)
            assert "amount" in flat(screen_text(app))
            app.screen.query_one("#table-schema").focus()
            await pilot.press("down")  # order_id, then amount
            await settle(pilot)
            await pilot.press("l")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, ColumnLineageScreen)
            assert (screen.key, screen.column) == (f"{NS}.silver.clean_orders", "amount")
            text = flat(screen_text(app))
            assert "silver.clean_orders.amount derived" in text
            assert "bronze.raw_orders.quantity copy" in text and "gold.product_funnel.revenue derived" in text
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------------------- snapshots


def snap(snap_compare, app, key, *keys, size):
    async def run_before(pilot) -> None:
        await open_columns(pilot, key)
        for k in keys:
            await pilot.press(k)
            await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshot_column_path_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), f"{NS}.gold.daily_revenue", *["down"] * 5, size=SMALL)


def test_snapshot_column_path_160x48(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), f"{NS}.silver.clean_orders", *["down"] * 5, size=LARGE)


def test_snapshot_python_pipeline_table_level_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), f"{NS}.gold.country_summary", size=SMALL)
