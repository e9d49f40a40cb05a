"""The Python API without Spark: `import ratui` stays light, `ratui.open()` and every read of pipelines, refs, history
and tables start no JVM, results render as escaped row-capped HTML, coded errors for bad inputs, and the IPython
magics load and refuse misuse. Nothing here starts Spark (the tables were committed by PyIceberg: conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ratui
from ratui.api.runs import Phase, PipelineRun, RunResult
from tests.api.conftest import ORDERS, SCRIPT

REPO = Path(__file__).resolve().parents[2]


def python(code: str, *args: str) -> dict:
    """`code` in a fresh interpreter (the ratui under test first on its path); its last stdout line as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


LIGHT = """
import json, sys
import ratui
loaded = lambda: sorted({m.split(".")[0] for m in sys.modules} & {"pyiceberg", "pandas", "pyspark", "textual", "polars",
                                                               "pyarrow", "IPython", "rich"})
after_import = loaded()
ratui.open, ratui.Project, ratui.RatuiError  # the names load the API package
print(json.dumps({"import": after_import, "names": loaded()}))
"""


def test_import_ratui_is_light():
    """The command line imports the package too: no PyIceberg, pandas, Arrow, Spark or Textual for it."""
    out = python(LIGHT)
    assert out == {"import": [], "names": []}


NO_JVM = """
import json, os, sys
import ratui

root, first = sys.argv[1], sys.argv[2]


def descendants():
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append((int(entry), name))
    out, stack = [], [os.getpid()]
    while stack:
        for pid, name in children.get(stack.pop(), []):
            out.append(name)
            stack.append(pid)
    return out


with ratui.open(root) as p:
    pipelines = p.pipelines
    refs = p.refs()
    history = p.history(limit=5)
    log = p.log("main")
    t = p.table("silver.clean_orders")
    arrow, frame, polars = t.to_arrow(), t.to_pandas(), t.to_polars()
    scan = t.scan(filter="order_id >= 90", columns=["order_id"]).to_arrow()
    past = p.table("clean_orders", ref="main@" + first[:8])
    html = [x._repr_html_() for x in (t, pipelines, refs, history, log, t.snapshots(), p)]
    result = {
        "pipelines": len(pipelines), "refs": [r.name for r in refs], "runs": len(history),
        "rows": [arrow.num_rows, len(frame), polars.height, scan.num_rows, past.to_arrow().num_rows],
        "scan_columns": scan.column_names, "snapshots": len(t.snapshots()),
        "pyspark_loaded": "pyspark" in sys.modules, "textual_loaded": "textual" in sys.modules,
        "children": descendants(),
    }
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession
        result["session"] = SparkSession.getActiveSession() is not None
print(json.dumps(result))
"""


def test_open_and_reads_start_no_jvm(offline_project):
    """ratui.open(), pipelines, refs, history, log, table reads (Arrow, pandas, polars, a scan, a past state) and
    their HTML: no Spark imported, no SparkSession, no child process at all (so no java)."""
    out = python(NO_JVM, str(offline_project["root"]), offline_project["first"])
    assert out["pipelines"] == 11 and out["refs"] == ["main"] and out["runs"] == 1
    assert out["rows"] == [100, 100, 100, 10, 60]
    assert out["scan_columns"] == ["order_id"] and out["snapshots"] == 2
    assert out["pyspark_loaded"] is False and out["textual_loaded"] is False and "session" not in out
    assert out["children"] == []


def test_pipelines_are_typed(offline_project):
    with ratui.open(offline_project["root"]) as p:
        pipelines = {x.key: x for x in p.pipelines}
    orders = pipelines[ORDERS]
    assert (orders.layer, orders.name, orders.kind, orders.strategy) == ("silver", "clean_orders", "sql", "incremental")
    assert orders.upstream == ("ecommerce.bronze.raw_orders",) and "daily" in orders.tags
    assert "unique_order_id" in orders.tests and orders.ok
    assert pipelines["ecommerce.gold.country_summary"].kind == "python"
    order = list(pipelines)
    assert order.index("ecommerce.bronze.raw_orders") < order.index(ORDERS)  # run order


def test_tables_read_at_refs_past_states_and_times(offline_project):
    root, first, second = offline_project["root"], offline_project["first"], offline_project["second"]
    with ratui.open(root) as p:
        t = p.table(ORDERS)
        assert t.ref == "main" and t.key == ORDERS and t.count() == 100
        assert t.schema.names == ["order_id", "status", "amount"]
        assert t.to_arrow(limit=5).num_rows == 5
        past = p.table("clean_orders", ref=f"main@{first[:8]}")
        assert past.ref == f"main@{first}" and past.count() == 60
        created = p.log("main")[-1].created_at  # branch main's first commit: before the table existed
        second_at = next(e.created_at for e in p.log("main") if e.hash == second)
        assert p.table("clean_orders", at=second_at).count() == 100
        with pytest.raises(ratui.RatuiError) as err:
            p.table("clean_orders", at=created)
        assert err.value.code == "RAT-CAT-005"
        scan = t.scan(filter="status = 'shipped' and order_id < 10", columns=["order_id", "status"])
        assert sorted(scan.to_pandas()["order_id"]) == [i for i in range(10) if i != 7]
        assert scan.to_polars().columns == ["order_id", "status"]
        assert [s.operation for s in t.snapshots()] == ["append", "append"]


def test_polars_missing_is_a_coded_error(offline_project):
    """Without polars installed, to_polars() says how to install it (polars is simulated away: a None entry in
    sys.modules makes its import fail as a missing package does)."""
    code = """
import json, sys
sys.modules["polars"] = None
import ratui
p = ratui.open(sys.argv[1])
try:
    p.table("clean_orders").to_polars()
except ratui.RatuiError as exc:
    print(json.dumps(exc.to_dict()))
"""
    error = python(code, str(offline_project["root"]))
    assert error["code"] == "RAT-API-003" and "pip install polars" in error["hint"]


# -------------------------------------------------------------------------------------------------- HTML


def test_html_is_escaped_and_row_capped(offline_project):
    with ratui.open(offline_project["root"]) as p:
        t = p.table(ORDERS)
        parts = {"table": t._repr_html_(), "scan": t.scan(filter="order_id < 50")._repr_html_(),
                 "history": p.history()._repr_html_()}
    for name, text in parts.items():
        if name != "history":
            assert text.count("<tr>") == 1 + 20, name  # the header and 20 rows
        assert "<script>" not in text, name
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in parts["table"]
    assert "20 of 100 rows shown" in parts["table"]
    assert "first 20 rows shown" in parts["scan"]
    assert "RAT-SQL-001" in parts["history"] and "&lt;script&gt;" in parts["history"]


def test_run_result_html_is_escaped():
    run = PipelineRun("r1", ORDERS, "failed", "main", False, "full", "a reason", "full_refresh", 0, 10, 0,
                      (Phase("branch", 3, "done"), Phase("build", 7, "failed")), (),
                      ratui.RunError("RAT-SQL-001", f"bad {SCRIPT}"))
    result = RunResult("main", (run,))
    text = result._repr_html_()
    assert result.status == "failed" and not result.merged and "<script>" not in text and "&lt;script&gt;" in text
    assert result["clean_orders"] is run and [e.code for e in result.errors] == ["RAT-SQL-001"]
    with pytest.raises(ratui.RatuiError) as err:
        result.raise_for_status()
    assert err.value.code == "RAT-SQL-001"


# ------------------------------------------------------------------------------------------------ errors


def test_bad_inputs_are_coded_errors(offline_project, tmp_path):
    root = offline_project["root"]
    cases = {
        "RAT-PRJ-005": lambda p: ratui.open(tmp_path),
        "RAT-CAT-005": lambda p: p.table("silver.no_such_table"),
        "RAT-CAT-002": lambda p: p.table(ORDERS, ref="no-such-branch"),
        "RAT-DAG-003": lambda p: p.run("raw_orderz"),
        "RAT-DAG-004": lambda p: p.run("layr:silver"),
        "RAT-CAT-007": lambda p: p.run("raw_orders", ref=f"main@{offline_project['first']}"),
        "RAT-ACC-002": lambda p: p.sql("DROP TABLE silver.clean_orders").to_arrow(),
    }
    with ratui.open(root) as p:
        for code, call in cases.items():
            with pytest.raises(ratui.RatuiError) as err:
                call(p)
            assert err.value.code == code, (code, err.value)
            assert err.value.hint
            if code == "RAT-ACC-002":  # told in the API's words, not a console's
                assert "p.sql() only reads" in err.value.message and "p.run()" in err.value.hint
        for call in (lambda: p.run(42), lambda: p.table(None), lambda: p.history(limit=0),
                     lambda: p.table(ORDERS).to_arrow(limit=-1), lambda: p.run("raw_orders", wait="yes")):
            with pytest.raises(ratui.RatuiError) as err:
                call()
            assert err.value.code == "RAT-API-002"
    p = ratui.open(root)
    t = p.table(ORDERS)
    p.close()
    p.close()  # twice is harmless
    for call in (p.refs, lambda: p.table(ORDERS), t.to_arrow, lambda: p.run("raw_orders")):
        with pytest.raises(ratui.RatuiError) as err:
            call()
        assert err.value.code == "RAT-API-001"


def test_branch_block_that_raises_deletes_the_branch_it_created(offline_project):
    """The `with` rule without any run: the block raises, the branch it created goes; an existing one stays."""
    with ratui.open(offline_project["root"]) as p:
        head = p.refs()[0].head
        with pytest.raises(ZeroDivisionError):
            with p.branch("dev-offline") as b:
                assert b.created and b.exists and b.table("clean_orders").count() == 100
                raise ZeroDivisionError("the block failed")
        assert [r.name for r in p.refs()] == ["main"] and p.refs()[0].head == head
        p.create_branch("dev-kept")
        with pytest.raises(KeyError):
            with p.branch("dev-kept") as b:
                assert not b.created
                raise KeyError("x")
        assert "dev-kept" in [r.name for r in p.refs()]
        with p.branch("dev-new") as b:
            pass
        assert b.exists  # a block that ends normally keeps it
        b.delete()
        p.delete_branch("dev-kept")
        assert [r.name for r in p.refs()] == ["main"]


# ------------------------------------------------------------------------------------------------ magic


def test_ipython_magic_loads_and_refuses_misuse(offline_project):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert shell.run_cell("%load_ext ratui").success
        missing = shell.run_cell("%%ratui_sql main\nSELECT 1")
        assert missing.error_in_exec.code == "RAT-API-006"  # no project opened yet
        opened = shell.run_cell(f"p = %ratui_open {offline_project['root']}")
        assert opened.success and isinstance(shell.user_ns["p"], ratui.Project)
        for cell, code in (("%%ratui_sql main --bogus\nSELECT 1", "RAT-API-006"),
                           ("%%ratui_sql main dev\nSELECT 1", "RAT-API-006"),
                           ("%%ratui_sql main --limit x\nSELECT 1", "RAT-API-006"),
                           ("%%ratui_sql main\n   ", "RAT-API-006"),
                           ("%%ratui_sql no-such-branch\nSELECT 1", "RAT-CAT-002")):
            outcome = shell.run_cell(cell)
            assert isinstance(outcome.error_in_exec, ratui.RatuiError), cell
            assert outcome.error_in_exec.code == code, cell
    finally:
        shell.run_cell("%unload_ext ratui")
        InteractiveShell.clear_instance()

