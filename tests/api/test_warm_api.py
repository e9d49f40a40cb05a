"""The Python API's runs and queries answered by the project's warm engine (ratui/warm/api_served.py): a script whose
process has no Spark of its own gets `p.run(...)` and `p.sql(...).to_arrow()` from the engine's warm Spark, with the
same typed result (the run recorded with trigger api), the same rows, limit and refusals as in process; a script from
another environment works in its own process and leaves the engine as it was. Each script is a process of its own,
as a user's is (this test's process may hold a Spark of its own from other tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.warm_engines import warm_engines

PIPELINE = "SELECT id, id * 10 AS tens FROM VALUES (1), (2), (3), (4) AS t(id)\n"
SCRIPT = r"""
import json, sys
import ratui
from ratui.engine.spark import session
p = ratui.open(sys.argv[1])
out = {}
r = p.run("bronze.items", force=True)
out["run"] = [r.status, r["items"].rows_written, r.merged, r.run_ids[0], [ph.name for ph in r["items"].phases]]
rows = p.sql("SELECT id, tens FROM bronze.items ORDER BY id").to_arrow()
out["rows"] = rows.to_pylist()
out["limited"] = p.sql("SELECT id FROM bronze.items ORDER BY id").to_arrow(limit=2).num_rows
try:
    p.sql("SELECT reflect('java.lang.System', 'exit', '0')").to_arrow()
except ratui.RatuiError as exc:
    out["refused"] = [exc.code, exc.message]
out["own_spark"] = session.is_started()
p.close()
print(json.dumps(out))
"""


def recorded(root: Path, env: dict, run_id: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "ratui", "runs", "--json", "--limit", "20", "--project", str(root)],
                         env=env, capture_output=True, text=True, check=True).stdout
    (run,) = [r for r in (json.loads(line) for line in out.splitlines() if line.strip()) if r["id"] == run_id]
    return run


def engine_status(root: Path, env: dict) -> dict | None:
    out = subprocess.run([sys.executable, "-m", "ratui", "engine", "status", "--json", "--project", str(root)],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["engine"]


def script(root: Path, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(root)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_p_run_and_p_sql_are_answered_by_the_running_engine_and_another_environment_by_its_own(tmp_path,
                                                                                               make_project):
    root = make_project({"demo/pipelines/bronze/items/pipeline.sql": PIPELINE})
    with warm_engines(tmp_path / "engines") as warm:
        env = {**os.environ, **warm}
        built = subprocess.run([sys.executable, "-m", "ratui", "run", "--project", str(root)], env=env,
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stderr
        deadline = time.monotonic() + 180  # the engine started beside that command warms up once it has ended
        while not ((status := engine_status(root, env)) and status.get("spark") and status.get("engines_open")):
            assert time.monotonic() < deadline, f"the engine did not warm up: {status}"
            time.sleep(0.2)
        engine = status

        served = script(root, env)
        status_, rows_written, merged, run_id, phases = served["run"]
        assert (status_, rows_written, merged) == ("success", 4, True)
        assert phases == ["branch", "config", "build", "write", "quality", "resolve"]
        run = recorded(root, env, run_id)
        assert run["trigger"] == "api" and run["pid"] == engine["pid"]  # run by the engine, as the script's
        expected = [{"id": i, "tens": i * 10} for i in (1, 2, 3, 4)]
        assert served["rows"] == expected and served["limited"] == 2
        code, message = served["refused"]
        assert code == "RAT-ACC-002" and "p.sql() only reads" in message
        assert served["own_spark"] is False  # the script started no Spark: the engine answered
        after = engine_status(root, env)
        assert after["pid"] == engine["pid"] and after["commands_served"] == engine["commands_served"] + 4

        own = script(root, {**env, "RATUI_TEST_OTHER_SCRIPT": "1"})
        assert own["rows"] == expected and own["limited"] == 2 and own["refused"][0] == "RAT-ACC-002"
        assert own["own_spark"] is True  # answered in its own process
        assert own["run"][:3] == ["success", 4, True] and recorded(root, env, own["run"][3])["pid"] != engine["pid"]
        last = engine_status(root, env)
        assert last["pid"] == engine["pid"] and last["commands_served"] == after["commands_served"]
