"""What the sample project gives in classic local mode (embedded catalog), for the cluster, Connect and Nessie tests
to compare against."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLE

# columns that hold the run's own time: left out of the comparison
RUN_TIME_COLUMNS = ("ingested_at",)


def checksum_sql(keys: list[str], columns: dict[str, list[str]]) -> str:
    """One query: every table's row count and a hash of all its rows (run-time columns left out)."""
    parts = []
    for key in sorted(keys):
        drop = [c for c in RUN_TIME_COLUMNS if c in columns[key]]
        source = f"SELECT * EXCEPT ({', '.join(drop)}) FROM {key}" if drop else f"SELECT * FROM {key}"
        parts.append(f"SELECT '{key}' AS t, count(*) AS n, sum(hash(*)) AS h FROM ({source})")
    return " UNION ALL ".join(parts)


def sample_keys(project: Path) -> list[str]:
    from ratui.engine.project.compiler import compile_project
    from ratui.engine.project.settings import load_settings

    return sorted(compile_project(project, load_settings(project)).pipelines)


@pytest.fixture(scope="session")
def local_sample(spark, tmp_path_factory):
    """The sample project run in this process's classic local Spark: a first run, then a forced one. Returns
    {"keys": [...], "columns": {key: [...]}, "sql": checksum query, "first": {key: (rows, hash)}, "forced": {...},
    "first_warned": [pipelines whose first run warned], "root": the project (for test_runs.py's end-to-end test to
    go on with: nothing else reads it)}; the Python pipelines' tables also after a forced run in ratui's own process
    ("in_process": the same rows, so the project is as the forced run left it), and the level they ran at in the
    forced run ("isolation")."""
    from ratui.engine.facade.engine import Engine

    root = tmp_path_factory.mktemp("local-sample") / "sample"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    engine = Engine.open(root)
    try:
        keys = engine.compile().select([])
        first = engine.run(keys)
        assert all(r.status == "success" for r in first), [(r.pipeline, r.status, r.error) for r in first]
        first_warned = sorted(r.pipeline for r in first if r.warnings)
        columns = {key: engine.query(f"SELECT * FROM {key}", limit=1)[0] for key in keys}
        sql = checksum_sql(keys, columns)
        after_first = {row[0]: (row[1], row[2]) for row in engine.query(sql)[1]}
        forced = engine.run(keys, force=True)
        assert all(r.status == "success" for r in forced), [(r.pipeline, r.status, r.error) for r in forced]
        after_forced = {row[0]: (row[1], row[2]) for row in engine.query(sql)[1]}
        # the sample's Python pipelines ran isolated (the default level); once more in ratui's own process
        python = [k for k in keys if engine.compile().pipelines[k].kind == "python"]
        isolation = {r.pipeline: engine.state.history.get_run(r.run_id)["isolation"] for r in forced
                     if r.pipeline in python}
    finally:
        engine.close()
    settings = (root / "ratui.yaml").read_text()
    (root / "ratui.yaml").write_text(settings + "python:\n  isolation: none\n")
    engine = Engine.open(root)
    try:
        in_process = engine.run(python, force=True)
        assert all(r.status == "success" for r in in_process), [(r.pipeline, r.error) for r in in_process]
        after_in_process = {row[0]: (row[1], row[2]) for row in engine.query(sql)[1] if row[0] in python}
    finally:
        engine.close()
        (root / "ratui.yaml").write_text(settings)
    return {"keys": keys, "columns": columns, "sql": sql, "first": after_first, "forced": after_forced,
            "first_warned": first_warned, "root": root, "python": python, "isolation": isolation,
            "in_process": after_in_process}
