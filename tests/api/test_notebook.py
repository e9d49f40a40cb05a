"""The Python API driven as a notebook would, end to end, on a copy of the sample project, with Spark.

One project per module (`notebook`): it is built through the API itself (raw_orders and clean_orders only, the
cheapest selector that gives a real table with quality tests), and every test goes on from there. A test pipeline,
bronze.api_gate, waits for a gate file, so a run started with wait=False can be watched from another process for as
long as the test needs (no timing assumed).
"""

from __future__ import annotations

import signal
import threading

import pytest

import ratui
from ratui.engine.vocabulary import PHASES
from tests.api.conftest import ORDERS, copy_sample
from tests.servers import json_lines, ratui as ratui_cli, wait_for

RAW = "ecommerce.bronze.raw_orders"
GATE_KEY = "ecommerce.bronze.api_gate"

GATE_PIPELINE = '''\
# @merge_strategy: full_refresh
# @isolation: none
# A test's pipeline: it waits for the test's gate file (outside the project, hence in ratui's own process), so the
# test can watch its run while it is running.
import time
from pathlib import Path

GATE = Path(r"{gate}")


def run(ctx):
    deadline = time.monotonic() + 150
    while not GATE.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return ctx.sql("SELECT 1 AS id")
'''


@pytest.fixture(scope="module")
def notebook(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("api-notebook")
    root = copy_sample(base / "sample")
    gate = base / "gate"
    folder = root / "ecommerce" / "pipelines" / "bronze" / "api_gate"
    folder.mkdir(parents=True)
    (folder / "pipeline.py").write_text(GATE_PIPELINE.format(gate=gate))
    p = ratui.open(root)
    first = p.run("+silver.clean_orders")
    yield {"p": p, "root": root, "gate": gate, "first": first}
    p.close()


def main_head(p) -> str:
    return next(r.head for r in p.refs() if r.name == "main")


def scalar(query) -> int:
    return query.to_arrow().column(0)[0].as_py()


def test_notebook_end_to_end(notebook):
    p, first = notebook["p"], notebook["first"]

    # the project
    pipelines = {x.key: x for x in p.pipelines}
    assert pipelines[ORDERS].upstream == (RAW,) and pipelines[GATE_KEY].kind == "python"

    # the run of a selector: typed, with phases, quality tests and the merge
    assert first.status == "success" and first.merged and first.errors == []
    assert [r.pipeline for r in first] == [RAW, ORDERS]
    orders = first["silver.clean_orders"]
    assert [phase.name for phase in orders.phases] == list(PHASES)
    assert all(phase.duration_ms >= 0 and phase.status == "done" for phase in orders.phases)
    assert {t.test for t in orders.tests} >= {"unique_order_id", "not_null_keys"}
    assert all(t.status in ("passed", "warned") for t in orders.tests)
    assert orders.merged and orders.ref == "main" and orders.rows_written > 0
    runs = p.history(limit=2)
    assert {r.run_id for r in runs} == set(first.run_ids) and {r.trigger for r in runs} == {"api"}
    assert "<table>" in first._repr_html_()

    # a table: PyIceberg's Arrow, pandas and polars agree with Spark's SQL
    t = p.table("silver.clean_orders")
    n = scalar(p.sql("SELECT count(*) AS n FROM silver.clean_orders"))
    assert n > 0 and t.to_arrow().num_rows == n == len(t.to_pandas()) == t.to_polars().height == t.count()
    picked = t.scan(filter="status = 'shipped' and amount > 100", columns=["order_id"]).to_arrow()
    by_sql = p.sql("SELECT order_id FROM silver.clean_orders WHERE status = 'shipped' AND amount > 100").to_arrow()
    assert sorted(picked["order_id"].to_pylist()) == sorted(by_sql["order_id"].to_pylist()) != []
    frame = p.sql("SELECT status, count(*) AS n FROM silver.clean_orders GROUP BY status").spark()
    assert type(frame).__name__ == "DataFrame" and sum(row["n"] for row in frame.collect()) == n
    shown = p.sql("SELECT order_id, status FROM silver.clean_orders")._repr_html_()
    assert shown.count("<tr>") == 21 and "first 20 rows shown" in shown

    # a branch: runs merge into it, main is untouched until the merge by hand
    before = main_head(p)
    with p.branch("dev-alice", from_="main") as b:
        assert b.created
        result = b.run("silver.clean_orders", full_refresh=True)  # rewritten: a change to land
        assert result.status == "success" and result.merged and result["clean_orders"].ref == "dev-alice"
        assert main_head(p) == before
        changes = b.diff("main")
        assert [(c.table, c.change, c.changed_on) for c in changes] == [(ORDERS, "modified", "left")]
        assert scalar(b.sql("SELECT count(*) FROM silver.clean_orders")) == n
        assert b.table("clean_orders").snapshot_id != t.snapshot_id
        dry = b.merge(into="main", dry_run=True)
        assert dry.tables == [ORDERS] and main_head(p) == before
        merged = b.merge(into="main")
        assert merged.tables == [ORDERS] and merged.commit is not None
        assert p.table("clean_orders").snapshot_id == b.table("clean_orders").snapshot_id
    assert b.exists  # the block ended normally: kept
    assert scalar(p.sql("SELECT count(*) FROM silver.clean_orders", ref=f"main@{before}")) == n  # a past state

    # a block that raises: the branch it created goes, with what ran on it; main stays as it was
    head = main_head(p)
    with pytest.raises(RuntimeError, match="the cell failed"):
        with p.branch("dev-broken") as broken:
            assert broken.run("silver.clean_orders", full_refresh=True).merged
            raise RuntimeError("the cell failed")
    assert "dev-broken" not in {r.name for r in p.refs()} and main_head(p) == head
    b.delete()


def test_background_run_is_seen_live_by_another_process_and_cancels(notebook):
    p, root, gate = notebook["p"], str(notebook["root"]), notebook["gate"]

    def listed(run_id: str, status: str):
        out = ratui_cli("runs", "--project", root, "--json", "--limit", "10")
        assert out.returncode == 0, out.stderr
        return next((r for r in json_lines(out.stdout) if r["id"] == run_id and r["status"] == status), None)

    handle = p.run("bronze.api_gate", wait=False)
    run_id = handle.run_ids[0]
    assert handle.status == "running" and not handle.done
    row = wait_for(lambda: listed(run_id, "running"), 120, "`ratui runs` (another process) shows the API's run")
    assert row["trigger"] == "api" and row["ref"] == "main"
    with pytest.raises(ratui.RatuiError) as err:
        handle.wait(timeout=0.1)
    assert err.value.code == "RAT-API-004"
    gate.touch()
    result = handle.wait()
    assert result.status == "success" and result.merged and handle.status == "success"
    assert listed(run_id, "success")

    gate.unlink()
    head = main_head(p)
    stopped = p.run("bronze.api_gate", wait=False, force=True)
    wait_for(lambda: p.get_run(stopped.run_ids[0]).status == "running", 120, "the second run is running")
    assert stopped.cancel() == "requested"
    outcome = stopped.wait()
    assert outcome.status == "cancelled" and not outcome.merged
    assert outcome.runs[0].error is not None and outcome.runs[0].error.code == "RAT-RUN-001"
    assert main_head(p) == head and listed(stopped.run_ids[0], "cancelled")

    # a waiting run() interrupted (a notebook's stop button is SIGINT): the runs are cancelled, then it raises
    def interrupt() -> None:
        wait_for(lambda: p.history(limit=1, pipeline=GATE_KEY)[0].status == "running", 120, "the third run runs")
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        p.run("bronze.api_gate", force=True)
    assert p.history(limit=1, pipeline=GATE_KEY)[0].status == "cancelled" and main_head(p) == head


def test_sql_cell_magic_returns_arrow_or_pandas(notebook):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert shell.run_cell("%load_ext ratui").success
        assert shell.run_cell(f"%ratui_open {notebook['root']}").success
        cell = shell.run_cell("%%ratui_sql main --limit 5\nSELECT order_id, status FROM silver.clean_orders")
        assert cell.success and cell.result.num_rows == 5 and cell.result.column_names == ["order_id", "status"]
        frame = shell.run_cell("%%ratui_sql --pandas\nSELECT count(*) AS n FROM silver.clean_orders").result
        assert list(frame.columns) == ["n"] and int(frame["n"][0]) == notebook["p"].table("clean_orders").count()
    finally:
        shell.run_cell("%unload_ext ratui")
        InteractiveShell.clear_instance()
