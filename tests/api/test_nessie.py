"""The Python API over a Nessie server as the catalog, as over the embedded one: tables read by PyIceberg (through
Nessie's Iceberg REST at the ref), refs, history, a branch and its `with` rule, diff and a dry-run merge. It goes on
with the session's Nessie sample (tests/conftest.py nessie_sample, which the engine's and the console's Nessie tests
share): no Spark from the API, and main is left as it was (no table's rows change, so any order of those tests holds).
"""

from __future__ import annotations

import pytest

import ratui
from tests.api.conftest import ORDERS


def main_head(p) -> str:
    return next(r.head for r in p.refs() if r.name == "main")


def test_the_api_on_a_nessie_catalog(nessie_sample):
    results = {r.pipeline: r for r in nessie_sample["results"]}
    assert all(r.status == "success" for r in results.values()), [(k, r.status, r.error) for k, r in results.items()
                                                                  if r.status != "success"]
    with ratui.open(nessie_sample["root"]) as p:
        assert type(p._engine.state.catalog).__name__ == "NessieBranchCatalog"
        head = main_head(p)
        assert {x.key for x in p.pipelines} == set(results)
        for key, result in results.items():
            t = p.table(key)
            rows = t.to_arrow().num_rows
            assert rows == t.count() > 0, key
            if result.strategy == "full_refresh":
                assert rows == result.rows_written, key
        assert {r.run_id for r in p.history(limit=100)} >= {r.run_id for r in results.values()}
        orders = p.table("silver.clean_orders").count()

        with pytest.raises(RuntimeError):
            with p.branch("api-nessie-broken") as broken:
                assert broken.created and broken.table("clean_orders").count() == orders
                raise RuntimeError("the cell failed")
        assert "api-nessie-broken" not in {r.name for r in p.refs()}

        with p.branch("api-nessie") as b:
            assert list(b.diff("main")) == [] and b.table(ORDERS).count() == orders
            assert b.merge(into="main", dry_run=True).tables == []
        assert b.exists
        b.delete()
        assert main_head(p) == head and {r.name for r in p.refs()} == {"main"}
