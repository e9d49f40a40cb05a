"""The bundled sample project run end to end by the engine on a real Nessie server instead of the embedded catalog:
the same rows as on the embedded catalog, every table on Nessie's main, and no run branch left."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import requests

from ratui.engine.project.settings import load_settings
from ratui.engine.run.engine import Engine
from ratui.engine.state.project_state import ProjectState

SAMPLE = Path(__file__).resolve().parents[3] / "sample_project"


def fresh_sample(dest: Path) -> Path:
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def failures(results: list) -> list[tuple[str, str, str]]:
    return [(r.pipeline, r.error["code"], r.error["message"]) for r in results if r.error]


def table_rows(engine: Engine) -> dict[str, tuple[int, str]]:
    """Each table on main: its row count and a SHA-256 of its rows in order (the run's own timestamp column,
    ingested_at, left out: two runs at two moments)."""
    out = {}
    for key in sorted(engine.state.catalog.table_pointers("main")):
        _, layer, name = key.split(".")
        columns, _, _ = engine.query(f"SELECT * FROM {layer}.{name} LIMIT 0")
        kept = ", ".join(f"`{c}`" for c in columns if c != "ingested_at")
        _, rows, _ = engine.query(f"SELECT {kept} FROM {layer}.{name}", limit=10_000_000)
        digest = hashlib.sha256("\n".join(sorted(repr(tuple(r)) for r in rows)).encode()).hexdigest()
        out[key] = (len(rows), digest)
    return out


@pytest.mark.slow
def test_sample_runs_on_nessie_as_on_the_embedded_catalog(tmp_path: Path, spark,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import nessie_server

    embedded = Engine.open(fresh_sample(tmp_path / "embedded"))
    results = embedded.run(embedded.compile().select([]))
    assert all(r.status == "success" for r in results), failures(results)
    expected = table_rows(embedded)

    root = fresh_sample(tmp_path / "on-nessie")
    settings = load_settings(root)
    with nessie_server(tmp_path_factory.mktemp("nessie")) as uri:
        catalog = NessieBranchCatalog(uri, settings.db_path, settings.root)
        engine = Engine(ProjectState(settings, catalog=catalog))
        results = engine.run(engine.compile().select([]))
        assert all(r.status == "success" for r in results), failures(results)
        assert table_rows(engine) == expected

        # Nessie's own API: every table on main, no branch but main
        refs = requests.get(f"{uri}/trees", timeout=10).json()["references"]
        assert [r["name"] for r in refs] == ["main"]
        entries = requests.get(f"{uri}/trees/main/entries", timeout=10).json()["entries"]
        tables = {".".join(e["name"]["elements"]) for e in entries if e["type"] == "ICEBERG_TABLE"}
        assert tables == set(expected)
        # ratui's history is Nessie's log, with the runs in its commit properties
        log = engine.state.catalog.log("main", limit=200)
        assert {c.meta.get("run_id") for c in log if c.meta.get("kind") == "run"} >= {r.run_id for r in results}
