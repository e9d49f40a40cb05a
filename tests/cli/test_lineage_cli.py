"""`ratui lineage`: a column's path and a table's columns as a user reads them, text and --json, and bad names with
coded errors and exit 2. In-process (no Spark: the lineage is read from the SQL), once as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ratui.cli.main import main


@pytest.fixture
def sample(sample_copy):
    return str(sample_copy)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_columns_path_upstream_to_the_landing_zone_and_downstream(sample, capsys):
    code, out, _ = cli(capsys, "lineage", "silver.clean_orders.amount", "--project", sample)
    assert code == 0
    assert out.splitlines()[0] == "silver.clean_orders.amount  derived"
    upstream = out.split("upstream (where it comes from)\n")[1].split("downstream (what it feeds)\n")[0]
    assert "├─ bronze.raw_orders.quantity  copy\n" in upstream
    assert "│  └─ landing.orders.quantity  landing zone\n" in upstream
    assert "└─ bronze.raw_orders.unit_price  derived\n" in upstream
    downstream = out.split("downstream (what it feeds)\n")[1]
    assert "gold.daily_revenue.gross_revenue  derived" in downstream
    assert "gold.country_summary  table-level (a Python pipeline reads the whole table)" in downstream


def test_a_tables_columns_with_their_sources(sample, capsys):
    code, out, _ = cli(capsys, "lineage", "gold.daily_revenue", "--project", sample)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "gold.daily_revenue  SQL pipeline · reads silver.clean_orders, silver.product_catalog"
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in lines[3:]}
    assert rows["order_count"] == ["derived", "silver.clean_orders (its rows), silver.product_catalog (its rows)"]
    assert rows["order_date"] == ["copy", "silver.clean_orders.order_date"]
    code, out, _ = cli(capsys, "lineage", "gold.country_summary", "--project", sample)
    assert code == 0 and "Python pipeline · reads gold.customer_lifetime_value" in out
    assert "table-level only" in out


def test_json_holds_the_same_path(sample, capsys):
    code, out, _ = cli(capsys, "lineage", "ecommerce.gold.daily_revenue.gross_revenue", "--json", "--project", sample)
    assert code == 0
    data = json.loads(out)
    assert (data["table"], data["column"], data["kind"]) == ("ecommerce.gold.daily_revenue", "gross_revenue",
                                                             "derived")
    amount = data["upstream"][0]
    assert (amount["table"], amount["column"]) == ("ecommerce.silver.clean_orders", "amount")
    assert {(n["table"], n["column"]) for n in amount["next"]} == {("ecommerce.bronze.raw_orders", "quantity"),
                                                                  ("ecommerce.bronze.raw_orders", "unit_price")}
    assert all(n["next"][0]["zone"] and n["next"][0]["kind"] == "landing" for n in amount["next"])
    assert data["downstream"] == []
    code, out, _ = cli(capsys, "lineage", "landing.orders", "--json", "--project", sample)
    assert json.loads(out)["kind"] == "zone"


@pytest.mark.parametrize("name, code", [("gold..x", "RAT-LIN-001"), ("gold.nothing.x", "RAT-LIN-002"),
                                        ("gold.daily_revenue.nothing", "RAT-LIN-003"),
                                        ("gold.country_summary.revenue", "RAT-LIN-004")])
def test_bad_names_exit_2_with_a_coded_error(sample, capsys, name, code):
    rc, out, err = cli(capsys, "lineage", name, "--project", sample)
    assert rc == 2 and err.startswith(f"error[{code}]") and "\n  hint: " in err and out == ""
    rc, out, _ = cli(capsys, "lineage", name, "--json", "--project", sample)
    assert rc == 2 and json.loads(out)["error"]["code"] == code


def test_as_a_subprocess(sample):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-m", "ratui", "lineage", "bronze.raw_events.source_file", "--project",
                           sample], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "└─ landing.events (its file names)" in proc.stdout
