"""The data server starts ahead of the run that needs it (isolation/early.py): while the SQL pipelines upstream of
a confined Python pipeline run, with a real Spark, a real data server (Spark Connect) and real Iceberg tables.
A project with nothing isolated starts none; a start that fails is the run's coded error, not another run's."""

from __future__ import annotations

import threading
import time

import pytest

from ratui.engine.events import PhaseStarted, RunFinished, RunStarted
from ratui.engine.facade.engine import Engine
from ratui.engine.isolation import data_server

ISOLATION_YAML = """
python:
  isolation: confined
  timeout: 180
"""

BRONZE = "SELECT * FROM VALUES ('x', 1), ('y', 2), ('x', 5) AS t(g, v)\n"
SILVER = "SELECT g, sum(v) AS v FROM {{ ref('bronze.orders') }} GROUP BY g\n"
GOLD = '''# @merge_strategy: full_refresh
from pyspark.sql import functions as F


def run(ctx):
    return ctx.ref("silver.totals").withColumn("twice", F.col("v") * 2)
'''


@pytest.fixture
def clean_slate():
    """No data server and no early start left by an earlier test of this process, before and after."""
    data_server.stop_servers()
    yield
    data_server.stop_servers()


def project(make_project, gold_isolation: str | None = None):
    gold = GOLD if gold_isolation is None else GOLD.replace(
        "full_refresh\n", f"full_refresh\n# @isolation: {gold_isolation}\n", 1)
    root = make_project({
        "demo/pipelines/bronze/orders/pipeline.sql": BRONZE,
        "demo/pipelines/silver/totals/pipeline.sql": SILVER,
        "demo/pipelines/gold/doubled/pipeline.py": gold,
    })
    (root / "ratui.yaml").write_text((root / "ratui.yaml").read_text() + ISOLATION_YAML)
    return root


class Stamps:
    """When (time.time()) the engine emitted each event of interest, as an observer of its bus sees them."""

    def __init__(self, engine: Engine):
        self.seen: list[tuple[float, object]] = []
        self.pipelines: dict[str, str] = {}
        self._lock = threading.Lock()
        engine.subscribe(self.heard)

    def heard(self, event) -> None:
        with self._lock:
            if isinstance(event, RunStarted):
                self.pipelines[event.run_id] = event.pipeline
            self.seen.append((time.time(), event))

    def at(self, kind, pipeline: str, **fields) -> float:
        for stamp, event in self.seen:
            if isinstance(event, kind) and self.pipelines.get(event.run_id, "").endswith(pipeline) and all(
                    getattr(event, k) == v for k, v in fields.items()):
                return stamp
        raise AssertionError(f"no {kind.__name__} of {pipeline} {fields}")


def test_the_data_server_starts_while_the_sql_pipelines_upstream_run(make_project, spark, clean_slate):
    root = project(make_project)
    engine = Engine.open(root)
    stamps = Stamps(engine)
    results = engine.run(engine.compile().select([]))
    assert [r.status for r in results] == ["success"] * 3, [r.error and r.error["message"] for r in results]
    early = data_server.early_start()
    assert early is not None and early.error is None and early.ready_at is not None
    # it began before the first SQL pipeline ended, so before the Python pipeline's build phase
    assert early.began_at < stamps.at(RunFinished, "bronze.orders")
    assert early.began_at < stamps.at(PhaseStarted, "gold.doubled", phase="build")
    (server,) = data_server._servers
    assert server.alive() and server.confined
    gold = results[2]
    logs = [line["message"] for line in engine.state.history.get_run(gold.run_id)["logs"]]
    assert any("the data server was started early" in line for line in logs), logs
    assert any(line.startswith("python isolation: child steps: ") and "written +" in line for line in logs), logs
    assert [tuple(r) for r in engine.query("SELECT g, twice FROM gold.doubled ORDER BY g")[1]] == [("x", 12),
                                                                                                 ("y", 4)]
    engine.close()


def test_a_project_with_nothing_isolated_starts_no_data_server(make_project, spark, clean_slate):
    root = project(make_project, gold_isolation="none")
    engine = Engine.open(root)
    assert engine.start_data_server_early() is False  # what the console and the warm engine call
    results = engine.run(engine.compile().select([]))
    assert [r.status for r in results] == ["success"] * 3, [r.error and r.error["message"] for r in results]
    assert data_server.early_start() is None and data_server.current() is None
    assert not data_server._servers
    engine.close()


def test_a_failed_early_start_is_the_coded_error_of_the_run_that_needed_it(make_project, spark, clean_slate,
                                                                          monkeypatch, tmp_path):
    root = project(make_project)
    engine = Engine.open(root)
    begun = []
    real = data_server.start_early
    monkeypatch.setattr(data_server, "start_early", lambda *a, **k: begun.append(real(*a, **k)) or begun[-1])
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))  # the data server's Java: ratui's Spark is up
    results = engine.run(engine.compile().select([]))
    # the SQL pipelines ran while the start failed; the run that needed the server has the start's coded error
    assert [r.status for r in results] == ["success", "success", "failed"], [r.error for r in results]
    assert results[2].error["code"] == "RAT-ISO-005" and "no Java found" in results[2].error["message"]
    (early,) = begun  # the start that failed was the early one, begun with the invocation
    assert getattr(early.error, "code", None) == "RAT-ISO-005"
    assert data_server.current() is None and data_server.early_start() is None  # the next run starts afresh
    engine.close()


def test_an_early_start_that_fails_is_kept_for_the_run_that_needs_the_server(tmp_path, monkeypatch, clean_slate):
    """No JVM: the start fails before one would start (no Java). start_early() never raises; data_server() raises
    the start's coded error once, for the run that needs the server; the next one starts afresh (and fails anew)."""
    with monkeypatch.context() as patch:  # put back within the test: the unit guard sets JAVA_HOME too
        patch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
        failing_starts(tmp_path)


def failing_starts(tmp_path) -> None:
    root, state = tmp_path / "proj", tmp_path / "proj" / ".ratui"
    reads = (root / "demo" / "warehouse",)
    early = data_server.start_early(root, state, reads, {}, confined=True)
    assert early.thread is not None
    early.thread.join(60)
    assert getattr(early.error, "code", None) == "RAT-ISO-005"
    with pytest.raises(Exception) as raised:
        data_server.data_server(root, state, reads, {}, confined=True)
    assert raised.value is early.error and "no Java found" in str(raised.value)
    assert data_server.early_start() is None  # consumed: the next run starts afresh
    with pytest.raises(Exception) as again:
        data_server.data_server(root, state, reads, {}, confined=True)
    assert getattr(again.value, "code", None) == "RAT-ISO-005" and again.value is not early.error
