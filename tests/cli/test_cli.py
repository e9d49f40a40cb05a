"""The command line, in-process (sharing the test run's Spark) and once as a real subprocess."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from ratui.cli import main
from ratui.engine.facade.engine import Engine

PIPE = "-- @merge_strategy: full_refresh\nSELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)\n"


@pytest.fixture
def project(make_project, spark):
    return make_project({
        "demo/pipelines/bronze/items/pipeline.sql": PIPE,
        "demo/pipelines/silver/items_clean/pipeline.sql":
            "SELECT id, upper(name) AS name FROM {{ ref('bronze.items') }}\n",
        "demo/pipelines/silver/items_clean/tests/quality/names.sql": "SELECT * FROM {{ this }} WHERE name IS NULL\n",
    })


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_prints_a_line_per_pipeline_and_a_summary(project, capsys):
    code, out, _ = cli(capsys, "run", "--project", str(project))
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("[OK") and "demo.bronze.items" in line and "2 rows" in line for line in lines)
    assert any("demo.silver.items_clean" in line and "full_refresh" in line for line in lines)
    assert "2 succeeded" in lines[-1]


def test_run_json_has_one_object_per_run(project, capsys):
    code, out, _ = cli(capsys, "run", "--project", str(project), "--json")
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o["pipeline"] for o in objs] == ["demo.bronze.items", "demo.silver.items_clean"]
    for o in objs:
        assert o["status"] == "success" and o["rows_written"] == 2 and o["error"] is None
        assert set(o["phases"]) == {"branch", "config", "build", "write", "quality", "resolve"}
        assert o["run_id"] and isinstance(o["duration_ms"], int)
    assert objs[1]["quality"][0]["test"] == "names" and objs[1]["quality"][0]["status"] == "passed"


def test_compile_error_exits_2_before_any_branch(project, capsys):
    (project / "demo/pipelines/bronze/items/pipeline.sql").write_text("-- @merge_strategy: upsert\nSELECT 1 AS id\n")
    code, out, err = cli(capsys, "run", "--project", str(project))
    assert code == 2
    assert "RAT-CFG-001" in err and "pipeline.sql" in err and "hint:" in err
    engine = Engine.open(project)
    assert engine.state.history.count_runs() == 0
    assert [r.name for r in engine.state.catalog.list_refs()] == ["main"]


def test_compile_error_json(project, capsys):
    (project / "demo/pipelines/bronze/items/pipeline.sql").write_text("SELECT {{ nope( }}\n")
    code, out, _ = cli(capsys, "run", "--project", str(project), "--json")
    assert code == 2
    error = json.loads(out.splitlines()[0])["error"]
    assert error["code"] == "RAT-TPL-001" and error["line"] == 1


def test_bad_selector_exits_2(project, capsys):
    code, _, err = cli(capsys, "run", "itemz", "--project", str(project))
    assert code == 2 and "RAT-DAG-003" in err and "items" in err


def test_failed_run_exits_1(project, capsys):
    (project / "demo/pipelines/bronze/items/pipeline.sql").write_text("SELECT missing_col FROM VALUES (1) AS t(id)\n")
    code, out, _ = cli(capsys, "run", "bronze.items", "--project", str(project))
    assert code == 1
    assert "[FAIL" in out and "RAT-SQL-001" in out


def test_query_formats_and_refs(project, capsys):
    assert cli(capsys, "run", "--project", str(project))[0] == 0
    code, out, _ = cli(capsys, "query", "SELECT id, name FROM silver.items_clean ORDER BY id", "--project",
                       str(project))
    assert code == 0 and out.splitlines()[0].split() == ["id", "name"] and "(2 rows)" in out
    code, out, _ = cli(capsys, "query", "SELECT id, name FROM demo.silver.items_clean ORDER BY id",
                       "--project", str(project), "--format", "csv")
    assert list(csv.reader(io.StringIO(out))) == [["id", "name"], ["1", "A"], ["2", "B"]]
    code, out, _ = cli(capsys, "query", "SELECT count(*) AS n FROM bronze.items", "--project", str(project),
                       "--format", "json")
    assert json.loads(out) == {"n": 2}
    code, _, err = cli(capsys, "query", "SELECT 1", "--project", str(project), "--ref", "nope")
    assert code != 0 and "RAT-CAT-002" in err
    code, _, err = cli(capsys, "query", "SELECT * FROM silver.unknown_table", "--project", str(project))
    assert code == 1 and "RAT-SQL-004" in err and "silver.items_clean" in err


def test_runs_show_and_branches(project, capsys):
    cli(capsys, "run", "--project", str(project), "--json")
    code, out, _ = cli(capsys, "runs", "--project", str(project), "--json")
    runs = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(runs) == 2
    assert runs[0]["pipeline"] == "demo.silver.items_clean"  # newest first
    code, out, _ = cli(capsys, "show", runs[0]["id"], "--project", str(project))
    assert code == 0 and "phases:" in out and "quality:" in out and "names" in out
    code, out, _ = cli(capsys, "show", runs[0]["id"], "--project", str(project), "--json")
    shown = json.loads(out)
    assert shown["id"] == runs[0]["id"] and shown["quality"][0]["status"] == "passed"
    code, _, err = cli(capsys, "show", "doesnotexist", "--project", str(project))
    assert code == 2 and "RAT-RUN-004" in err
    code, out, _ = cli(capsys, "branches", "--project", str(project))
    assert code == 0 and out.splitlines()[2].startswith("main")
    code, out, _ = cli(capsys, "runs", "--project", str(project))
    assert "demo.bronze.items" in out and "success" in out


def test_init_creates_a_project_that_runs(tmp_path, capsys, spark):
    target = tmp_path / "newproj"
    code, out, _ = cli(capsys, "init", str(target))
    assert code == 0 and (target / "ratui.yaml").exists()
    assert cli(capsys, "check", "--project", str(target))[0] == 0
    code, out, _ = cli(capsys, "run", "--project", str(target))
    assert code == 0 and "2 succeeded" in out
    code, _, err = cli(capsys, "init", str(target))
    assert code == 2 and "already" in err


def test_missing_project_is_a_clear_error(tmp_path, capsys):
    code, _, err = cli(capsys, "run", "--project", str(tmp_path))
    assert code == 2 and "RAT-PRJ-005" in err


def test_real_process_prints_nothing_from_spark(make_project, tmp_path):
    """The installed command on a fresh process: only ratui's own lines reach the terminal."""
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": PIPE}, name="quiet")
    env = dict(os.environ, PYTHONWARNINGS="default")
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines()[0].startswith("Running 1 pipeline")
    noise = ("WARN", "log4j", "SparkContext", "Using Spark", "NativeCodeLoader", "WARNING", "at org.")
    assert not any(word in proc.stdout for word in noise), proc.stdout
    assert (root / ".ratui/logs/spark.log").exists()
    # a short run over small inputs: its JVM compiled with Java's quick compiler only, and its log says so
    jvm_out = root / ".ratui/logs/jvm.out"
    starts = [line for line in jvm_out.read_text().splitlines() if line.startswith("ratui: starting Spark's JVM")]
    assert len(starts) == 1 and "JIT quick (spark.jit auto: 1 pipeline(s) reading at most" in starts[0], starts
    # a run that needs no Spark (everything unchanged, a selector matching nothing): no JVM outlives the command,
    # nothing of Spark reaches the terminal
    import psutil

    for argv, code in ((["run", "--project", str(root)], 0), (["run", "--project", str(root), "nope"], 2)):
        proc = subprocess.run([sys.executable, "-m", "ratui", *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == code, proc.stderr
        assert not any(word in proc.stdout + proc.stderr for word in noise), proc.stdout + proc.stderr
        left = []
        for p in psutil.process_iter(["cmdline"]):
            if any(str(root / ".ratui") in part for part in p.info["cmdline"] or []):
                left.append(p.pid)
        assert left == [], f"{argv}: processes of the project left running: {left}"
    assert "1 unchanged" in subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root)],
                                           capture_output=True, text=True, env=env, timeout=120).stdout
    # and none of those started a JVM, not even on the side
    assert jvm_out.read_text().count("ratui: starting Spark's JVM") == 1


def test_the_engine_imports_without_pandas_which_still_imports_after():
    """sqlite-utils would import pandas and numpy (half a second of every command's start) only to map their types:
    the engine imports it without them, and pyspark's own later import of pandas is unaffected."""
    script = ("import sys, ratui.cli, ratui.engine.facade.engine; "
              "print('pandas' in sys.modules, 'numpy' in sys.modules);"
              "import pandas, numpy; print(pandas.DataFrame({'a': [1]}).shape)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["False False", "(1, 1)"]


def test_spark_leaves_nothing_in_the_folder_a_command_starts_from(make_project, tmp_path):
    """A query naming an unknown table, and a run whose SQL names an unknown function, started from a folder
    outside the project: Spark's default folders (spark-warehouse/, Derby's log) go under .ratui/, not there."""
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": PIPE,
                         "demo/pipelines/bronze/odd/pipeline.sql": "SELECT no_such_function(1) AS x\n"},
                        name="pinned")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root), "--json"],
                         capture_output=True, text=True, timeout=300, cwd=scratch)
    codes = [json.loads(line)["error"]["code"] for line in run.stdout.splitlines()
             if line.startswith("{") and json.loads(line)["error"]]
    assert run.returncode == 1 and codes == ["RAT-SQL-001"], run.stdout + run.stderr
    query = subprocess.run([sys.executable, "-m", "ratui", "query", "--project", str(root),
                            "SELECT * FROM bronze.nosuch"], capture_output=True, text=True, timeout=300, cwd=scratch)
    assert query.returncode == 1 and "RAT-SQL-004" in query.stderr, query.stderr
    assert sorted(os.listdir(scratch)) == []


def test_a_stray_spark_remote_does_not_break_a_project_that_names_its_master(make_project, tmp_path):
    """SPARK_REMOTE exported in the shell (as Spark Connect users do), a project whose ratui.yaml names master:
    the local JVM starts (the variable is kept from PySpark's launcher) and the run says the variable was ignored,
    without its parameters (a token)."""
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": PIPE}, name="stray")
    (root / "ratui.yaml").write_text("namespace: demo\nspark:\n  master: local[1]\n")
    env = dict(os.environ, SPARK_REMOTE="sc://127.0.0.1:9/;token=do-not-show-me")
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root), "--json"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines[0] == {"event": "spark", "spark": "local[1]", "spark_remote_ignored": "sc://127.0.0.1:9"}
    assert lines[1]["status"] == "success"
    proc = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root), "--force"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "note: SPARK_REMOTE (sc://127.0.0.1:9) is ignored: ratui.yaml names Spark (local[1])\n"
    assert "do-not-show-me" not in proc.stdout + proc.stderr
