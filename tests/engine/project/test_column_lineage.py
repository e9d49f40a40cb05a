"""Column lineage (engine/project/column_lineage.py): the sample project's every column against a hand-written
expectation (expected_column_lineage.yaml, written by reading the SQL), paths across the DAG into landing zones,
Python pipelines table-level, and what ratui cannot resolve said as such. No Spark: the SQL is read, not run; a
Python pipeline's columns come from a real Iceberg table in the project's catalog."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from ratui.engine.errors import RatuiError
from ratui.engine.project.column_lineage import ProjectLineage
from ratui.engine.project.lineage_model import FILE, ROWS
from ratui.engine.project.compiler import compile_project
from ratui.engine.vocabulary import MAIN

NS = "ecommerce"
EXPECTED = yaml.safe_load((Path(__file__).with_name("expected_column_lineage.yaml")).read_text())


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    import shutil

    from tests.conftest import SAMPLE

    dest = tmp_path_factory.mktemp("lineage") / "sample"
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def lineage(sample) -> ProjectLineage:
    return ProjectLineage(compile_project(sample, cache=False))


def source_text(source) -> str:
    name = source.table.split(".", 1)[1]
    if source.what == ROWS:
        return f"rows:{name}"
    if source.what == FILE:
        return f"file:{name}"
    assert source.column is not None, source
    return f"{name}.{source.column}"


def sql_pipelines() -> list[str]:
    return [name for name, value in EXPECTED.items() if not name.startswith("landing.") and "table-level" not in value]


def test_the_expectation_covers_every_pipeline_of_the_sample(lineage):
    pipelines = {key[len(NS) + 1:] for key in lineage.compiled.pipelines}
    assert pipelines == {name for name in EXPECTED if not name.startswith("landing.")}


@pytest.mark.parametrize("name", sql_pipelines())
def test_every_column_of_a_sql_pipeline_as_written_by_hand(lineage, name):
    table = lineage.table(f"{NS}.{name}")
    assert table.kind == "sql" and not table.problem
    expected = EXPECTED[name]
    assert [c.column for c in table.columns] == list(expected)  # every output column, in the SELECT's order
    for column in table.columns:
        kind, *sources = expected[column.column]
        assert column.kind == kind, (name, column.column)
        assert sorted(source_text(s) for s in column.sources) == sorted(sources), (name, column.column)


@pytest.mark.parametrize("zone", ["customers", "orders", "events", "products"])
def test_landing_zone_columns_from_the_files(lineage, zone):
    table = lineage.table(f"{NS}.landing.{zone}")
    assert table.kind == "zone" and not table.problem
    assert [c.column for c in table.columns] == EXPECTED[f"landing.{zone}"]


def test_a_python_pipeline_is_table_level_only_and_says_so(lineage):
    table = lineage.table(f"{NS}.gold.country_summary")
    assert table.kind == "python" and not table.column_level
    assert list(table.reads) == [f"{NS}.{r}" for r in EXPECTED["gold.country_summary"]["table-level"]]
    assert "table-level only" in table.problem
    with pytest.raises(RatuiError) as err:
        lineage.column_path(f"{NS}.gold.country_summary", "revenue")
    assert err.value.code == "RAT-LIN-004"
    assert "gold.customer_lifetime_value" in err.value.hint


def flatten(nodes, depth=0):
    for node in nodes:
        yield depth, node
        yield from flatten(node.children, depth + 1)


def test_a_column_path_goes_upstream_to_the_landing_files(lineage):
    path = lineage.column_path(f"{NS}.gold.daily_revenue", "gross_revenue")
    upstream = [(d, n.table[len(NS) + 1:], n.column, n.kind) for d, n in flatten(path.upstream)]
    assert upstream[0] == (0, "silver.clean_orders", "amount", "derived")
    # amount = quantity * unit_price, each from bronze.raw_orders and from there the orders files
    assert sorted(upstream[1:]) == sorted([
        (1, "bronze.raw_orders", "quantity", "copy"), (2, "landing.orders", "quantity", "landing"),
        (1, "bronze.raw_orders", "unit_price", "derived"), (2, "landing.orders", "unit_price", "landing")])
    assert path.downstream == []  # a gold column nothing reads


def test_a_column_path_goes_downstream_to_every_use(lineage):
    path = lineage.column_path(f"{NS}.landing.orders", "quantity")
    assert path.origin.kind == "landing" and path.upstream == []
    down = {(n.table[len(NS) + 1:], n.column) for _, n in flatten(path.downstream)}
    assert {("bronze.raw_orders", "quantity"), ("silver.clean_orders", "quantity"), ("silver.clean_orders", "amount"),
            ("gold.daily_revenue", "units_sold"), ("gold.product_funnel", "units_sold"),
            ("gold.daily_revenue", "gross_revenue"), ("gold.customer_lifetime_value", "lifetime_value"),
            ("gold.product_funnel", "revenue")} <= down
    # the Python pipeline reads customer_lifetime_value whole: it is a (table-level) use of lifetime_value
    clv = next(n for _, n in flatten(path.downstream) if n.column == "lifetime_value")
    assert [(c.table, c.column, c.kind) for c in clv.children] == [(f"{NS}.gold.country_summary", None,
                                                                     "table-level")]
    # a column used only in a filter is no source: status feeds status-dependent sums, not units_sold
    status = lineage.column_path(f"{NS}.silver.clean_orders", "status")
    assert ("gold.daily_revenue", "units_sold") not in {(n.table[len(NS) + 1:], n.column)
                                                       for _, n in flatten(status.downstream)}


def test_path_to_dict_is_json_ready(lineage):
    import json

    data = json.loads(json.dumps(lineage.column_path(f"{NS}.silver.clean_orders", "amount").to_dict()))
    assert data["kind"] == "derived" and {s["column"] for s in data["sources"]} == {"quantity", "unit_price"}
    assert data["upstream"][0]["next"][0]["zone"] is True


@pytest.mark.parametrize("name, code", [
    ("gold", "RAT-LIN-001"), ("a..b", "RAT-LIN-001"), ("", "RAT-LIN-001"), ("a.b.c.d.e", "RAT-LIN-001"),
    ("gold.daily_revenu", "RAT-LIN-002"), ("platinum.x.y", "RAT-LIN-002"), ("landing.nowhere", "RAT-LIN-002"),
    ("other.gold.daily_revenue.order_date", "RAT-LIN-002"),
])
def test_bad_names_get_coded_errors(lineage, name, code):
    with pytest.raises(RatuiError) as err:
        key, column = lineage.split_column(name)
        lineage.column_path(key, column or "x")
    assert err.value.code == code


def test_an_unknown_column_suggests_the_nearest(lineage):
    with pytest.raises(RatuiError) as err:
        lineage.column_path(f"{NS}.silver.clean_orders", "amont")
    assert err.value.code == "RAT-LIN-003" and "amount" in err.value.hint


def test_names_resolve_in_the_default_namespace_and_in_full(lineage):
    assert lineage.split_column("gold.daily_revenue") == (f"{NS}.gold.daily_revenue", None)
    assert lineage.split_column("gold.daily_revenue.order_date") == (f"{NS}.gold.daily_revenue", "order_date")
    assert lineage.split_column(f"{NS}.gold.daily_revenue") == (f"{NS}.gold.daily_revenue", None)
    assert lineage.split_column(f"{NS}.gold.daily_revenue.Order_Date") == (f"{NS}.gold.daily_revenue",
                                                                            "Order_Date")
    assert lineage.column_path(f"{NS}.gold.daily_revenue", "Order_Date").origin.column == "order_date"
    assert lineage.split_column("landing.orders.status") == (f"{NS}.landing.orders", "status")


# ------------------------------------------------------------------------------ what cannot be resolved


def project(make_project, pipelines: dict[str, str], zones: dict[str, str] | None = None) -> ProjectLineage:
    files = {f"demo/pipelines/{name.replace('.', '/')}/pipeline.{'py' if text.startswith('def') else 'sql'}": text
             for name, text in pipelines.items()}
    files.update({f"demo/landing/{path}": text for path, text in (zones or {}).items()})
    return ProjectLineage(compile_project(make_project(files), cache=False))


def test_a_star_over_unknown_columns_is_unresolved_with_the_reason(make_project):
    lin = project(make_project, {
        "gold.py_table": "def run(ctx):\n    return ctx.ref('bronze.a')\n",
        "gold.reads_py": "SELECT * FROM {{ ref('gold.py_table') }}",
        "bronze.a": "SELECT id FROM {{ landing_zone('z') }}",
    }, {"z/f.csv": "id,name\n1,x\n"})
    table = lin.table("demo.gold.reads_py")
    assert table.columns == () and "SELECT *" in table.problem and "py_table" in table.problem


def test_a_column_a_known_source_lacks_is_unresolved(make_project):
    lin = project(make_project, {"bronze.a": "SELECT id, nope FROM {{ landing_zone('z') }}"},
                  {"z/f.csv": "id,name\n1,x\n"})
    table = lin.table("demo.bronze.a")
    assert [(c.column, c.kind) for c in table.columns] == [("id", "copy"), ("nope", "unresolved")]
    assert "no column 'nope'" in table.columns[1].note


def test_an_unresolvable_join_says_why(make_project):
    lin = project(make_project, {
        "gold.py_table": "def run(ctx):\n    return ctx.ref('bronze.a')\n",
        "silver.b": "SELECT id, name FROM {{ ref('bronze.a') }} JOIN {{ ref('gold.py_table') }} USING (id)",
        "bronze.a": "SELECT id FROM {{ landing_zone('z') }}",
    }, {"z/f.csv": "id\n1\n"})
    table = lin.table("demo.silver.b")
    name = table.column("name")
    assert name is not None and name.kind == "unresolved"
    assert "'name' is in none of the sources" in name.note and "gold.py_table are not known" in name.note
    # the key of USING is both sides' (Spark's coalesce of the two)
    assert [source_text(s) for s in table.column("id").sources] == ["bronze.a.id", "gold.py_table.id"]


def test_a_pipeline_that_does_not_compile_is_unresolved(make_project):
    lin = project(make_project, {"bronze.a": "SELECT id FROM {{ ref('bronze.nothing') }}"})
    table = lin.table("demo.bronze.a")
    assert table.kind == "broken" and "RAT-DAG-002" in table.problem


def test_a_zone_without_files_names_no_columns(make_project):
    lin = project(make_project, {"bronze.a": "SELECT * FROM {{ landing_zone('z') }}"}, {"z/.keep": ""})
    table = lin.table("demo.bronze.a")
    assert table.columns == () and "no files" in table.problem


def test_archived_files_name_the_columns_of_a_zone_whose_files_were_all_loaded(make_project):
    lin = project(make_project, {"bronze.a": "SELECT * FROM {{ landing_zone('z') }}"},
                  {"z/_processed/260101000000aaaa01/f.jsonl": '{"b": 1, "a": 2}\n{"c": 3}\n'})
    assert [(c.column, c.kind) for c in lin.table("demo.bronze.a").columns] == [("a", "copy"), ("b", "copy"),
                                                                                ("c", "copy")]


def test_a_python_pipelines_columns_come_from_its_table_on_main(sample):
    """A real Iceberg table of the Python pipeline on main: its columns are listed (table-level), and a SQL
    pipeline reading it resolves against them (a SELECT * too)."""
    from ratui.engine.facade.engine import Engine

    pipes = sample / "ecommerce" / "pipelines" / "gold" / "country_report"
    pipes.mkdir(parents=True)
    (pipes / "pipeline.sql").write_text("SELECT *, revenue / customers AS revenue_per_customer\n"
                                        "FROM {{ ref('gold.country_summary') }}\n")
    engine = Engine.open(sample)
    try:
        key = f"{NS}.gold.country_summary"
        schema = pa.schema([("country", pa.string()), ("customers", pa.int64()), ("revenue", pa.float64())])
        table = engine.state.catalog.create_table(MAIN, key, schema, sample / NS / "warehouse" / "gold" / "cs")
        table.append(pa.table({"country": ["DE"], "customers": [1], "revenue": [2.0]}, schema=schema))
        engine.state.catalog.record_commit(MAIN, f"write {key}")
        lin = engine.column_lineage()
        assert engine.column_lineage(lin.compiled) is lin  # kept for the compile it was made from
        python = lin.table(key)
        assert [(c.column, c.kind) for c in python.columns] == [("country", "table-level"),
                                                                ("customers", "table-level"),
                                                                ("revenue", "table-level")]
        report = lin.table(f"{NS}.gold.country_report")
        assert [(c.column, c.kind, [source_text(s) for s in c.sources]) for c in report.columns] == [
            ("country", "copy", ["gold.country_summary.country"]),
            ("customers", "copy", ["gold.country_summary.customers"]),
            ("revenue", "copy", ["gold.country_summary.revenue"]),
            ("revenue_per_customer", "derived", ["gold.country_summary.customers", "gold.country_summary.revenue"])]
        # upstream of a column read from a Python pipeline stops there, table-level, naming what it reads
        path = lin.column_path(f"{NS}.gold.country_report", "revenue")
        assert [(n.table, n.column, n.kind) for n in path.upstream] == [(key, "revenue", "table-level")]
        assert [(c.table, c.kind, c.what) for c in path.upstream[0].children] == [
            (f"{NS}.gold.customer_lifetime_value", "table-level", "table")]
    finally:
        engine.close()
