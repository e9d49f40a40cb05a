"""The bundled sample project run end to end by the engine on a real Nessie server instead of the embedded catalog:
the same rows as on the embedded catalog, every table on Nessie's main, and no run branch left."""

from __future__ import annotations

import shutil
from pathlib import Path

import requests

from ratui.engine.facade.engine import Engine

SAMPLE = Path(__file__).resolve().parents[3] / "sample_project"


def fresh_sample(dest: Path) -> Path:
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


def failures(results: list) -> list[tuple[str, str, str]]:
    return [(r.pipeline, r.error["code"], r.error["message"]) for r in results if r.error]


def test_sample_runs_on_nessie_as_on_the_embedded_catalog(nessie_sample, local_sample) -> None:
    """The same rows (every table's count and hash, run-time columns left out) as the sample's first run on the
    embedded catalog (local_sample, tests/engine/conftest.py). The run on Nessie is nessie_sample's
    (tests/conftest.py: the console's History test goes on with it)."""
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog

    uri, results = nessie_sample["uri"], nessie_sample["results"]
    assert all(r.status == "success" for r in results), failures(results)
    assert sorted(r.pipeline for r in results) == sorted(local_sample["keys"])
    engine = Engine.open(nessie_sample["root"])
    assert isinstance(engine.state.catalog, NessieBranchCatalog)
    checksums = {row[0]: (row[1], row[2]) for row in engine.query(local_sample["sql"])[1]}
    assert checksums == local_sample["first"]

    # Nessie's own API: every table on main, no branch but main
    refs = requests.get(f"{uri}/trees", timeout=10).json()["references"]
    assert [r["name"] for r in refs] == ["main"]
    entries = requests.get(f"{uri}/trees/main/entries", timeout=10).json()["entries"]
    tables = {".".join(e["name"]["elements"]) for e in entries if e["type"] == "ICEBERG_TABLE"}
    assert tables == set(local_sample["keys"])
    # ratui's history is Nessie's log, with the runs in its commit properties
    log = engine.state.catalog.log("main", limit=200)
    assert {c.meta.get("run_id") for c in log if c.meta.get("kind") == "run"} >= {r.run_id for r in results}
    engine.close()
