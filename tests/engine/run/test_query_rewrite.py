"""An ad-hoc query's table names become the views of the ref's tables (no Spark): only table references are
replaced, from sqlglot's parse; a name in a comment, a string or a column stays, and the rest of the text stays
exactly as typed, so Spark's line and column still point at what the user wrote."""

from __future__ import annotations

import pytest

from ratui.engine.run.query import rewrite

VIEWS = {"shop.silver.orders": "`v_orders`", "shop.bronze.raw_orders": "`v_raw`", "other.gold.kpis": "`v_kpis`"}


@pytest.mark.parametrize("sql, expected, used", [
    ("SELECT * FROM silver.orders", "SELECT * FROM `v_orders`", {"shop.silver.orders"}),
    ("-- silver.orders, in a comment\nSELECT 'silver.orders' AS s FROM silver.orders o",
     "-- silver.orders, in a comment\nSELECT 'silver.orders' AS s FROM `v_orders` o", {"shop.silver.orders"}),
    ("SELECT o.id FROM silver.orders o JOIN shop.bronze.raw_orders r ON o.id = r.id",
     "SELECT o.id FROM `v_orders` o JOIN `v_raw` r ON o.id = r.id", {"shop.silver.orders", "shop.bronze.raw_orders"}),
    ("SELECT *\n  FROM other.gold.kpis\n WHERE x IN (SELECT id FROM silver.orders)",
     "SELECT *\n  FROM `v_kpis`\n WHERE x IN (SELECT id FROM `v_orders`)", {"other.gold.kpis", "shop.silver.orders"}),
    ("SELECT * FROM `silver`.`orders`", "SELECT * FROM `v_orders`", {"shop.silver.orders"}),
    ("WITH orders AS (SELECT 1 AS id) SELECT * FROM orders", "WITH orders AS (SELECT 1 AS id) SELECT * FROM orders",
     set()),
    ("SELECT * FROM silver.nosuch", "SELECT * FROM silver.nosuch", set()),  # Spark says it is not there
    ("/* silver.orders */ SELECT silver.orders.id FROM silver.orders",
     "/* silver.orders */ SELECT silver.orders.id FROM `v_orders`", {"shop.silver.orders"}),
])
def test_only_table_references_are_replaced(sql, expected, used):
    assert rewrite(sql, VIEWS, "shop") == (expected, used)


def test_sql_sqlglot_cannot_parse_is_rewritten_from_its_tokens():
    sql = "SELECT * FROM silver.orders WHERE -- bronze.raw_orders\n id = )"
    text, used = rewrite(sql, VIEWS, "shop")
    assert text == "SELECT * FROM `v_orders` WHERE -- bronze.raw_orders\n id = )" and used == {"shop.silver.orders"}
