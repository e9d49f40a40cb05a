"""What a read-only console lets through to Spark: a query that only reads the project's tables (sqlglot's parse
of Spark SQL; no Spark needed to decide)."""

from __future__ import annotations

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.run.read_only_sql import check_read_only

TABLES = {"shop.silver.orders", "shop.bronze.raw_orders", "other.gold.kpis"}


@pytest.mark.parametrize("sql", [
    "SELECT * FROM silver.orders",
    "select o.id, r.x from silver.orders o join bronze.raw_orders r on o.id = r.id where o.id > 3",
    "SELECT * FROM other.gold.kpis",
    "WITH recent AS (SELECT * FROM silver.orders WHERE id > 1) SELECT count(*) FROM recent",
    "SELECT id FROM silver.orders UNION ALL SELECT id FROM bronze.raw_orders",
    "SELECT * FROM (SELECT id FROM silver.orders) t",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT 1",
    "SELECT * FROM range(10)",
    "SELECT explode(array(1, 2))",
    "DESCRIBE silver.orders",
    "SELECT 'reflect(x) and INSERT INTO t' AS text_not_code FROM silver.orders",  # words in a string are data
    "-- a comment naming DROP TABLE\nSELECT * FROM silver.orders",
    "SELECT * FROM silver.orders;",  # a trailing semicolon is one statement
])
def test_reads_of_the_projects_tables_pass(sql):
    check_read_only(sql, TABLES, "shop")


@pytest.mark.parametrize("sql, words", [
    ("INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT * FROM silver.orders", "INSERT is not a read"),
    ("INSERT INTO silver.orders VALUES (1)", "INSERT is not a read"),
    ("DROP TABLE silver.orders", "DROP is not a read"),
    ("CREATE TABLE x AS SELECT 1", "CREATE is not a read"),
    ("DELETE FROM silver.orders WHERE id = 1", "DELETE is not a read"),
    ("SET spark.sql.ansi.enabled=false", "SET is not a read"),
    ("ADD JAR /tmp/evil.jar", "not a read"),
    ("SELECT 1; DROP TABLE silver.orders", "one SELECT at a time"),
    ("SELECT reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')", "reflect()"),
    ("SELECT java_method('java.lang.Runtime', 'getRuntime')", "java_method()"),
    ("SELECT * FROM read_files('/etc/passwd')", "read_files()"),
    ("SELECT * FROM text.`/etc/passwd`", "text./etc/passwd is not a table of the project"),
    ("SELECT * FROM parquet.`/home/user/data.parquet`", "not a table of the project"),
    ("SELECT * FROM silver.secret_table", "silver.secret_table is not a table of the project"),
    ("SELECT * FROM spark_catalog.default.t", "not a table of the project"),
    ("SELECT * FROM (SELECT * FROM csv.`/root/.aws/credentials`) t", "not a table of the project"),
    ("SELEC * FROM silver.orders", "cannot tell that the query only reads"),
])
def test_anything_else_is_refused_saying_why(sql, words):
    with pytest.raises(RatuiError) as error:
        check_read_only(sql, TABLES, "shop")
    assert error.value.code == "RAT-ACC-002"
    assert words in error.value.message, error.value.message
