"""`ratui serve` over a project whose catalog is a real Nessie server behaves as over the embedded one: a table
PyIceberg creates and fills on a branch is one Nessie commit of kind external that diff shows and merge publishes,
main refuses outside writes, a transaction with a failed requirement changes nothing. No Spark: the project starts
empty."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.exceptions import ForbiddenError

from tests.rest.conftest import serve



@pytest.fixture(scope="module")
def nessie_project(nessie_uri, tmp_path_factory):
    from ratui.engine.state.project_state import ProjectState

    root = tmp_path_factory.mktemp("rest-nessie") / "p"
    root.mkdir()
    (root / "ratui.yaml").write_text(f"namespace: demo\ncatalog:\n  type: nessie\n  uri: {nessie_uri}\n")
    state = ProjectState.at(root)
    state.catalog.create_branch("dev")
    with serve(root) as server:
        yield server, state.catalog
    state.close()


def test_a_branch_on_nessie_takes_outside_commits_that_merge_publishes(nessie_project):
    server, catalog = nessie_project
    dev = server.pyiceberg("dev")
    dev.create_namespace(("demo", "silver"))
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("label", pa.string())])
    written = pa.table({"id": [1, 2], "label": ["a", "b"]}, schema=schema)
    for name in ("one", "two"):
        dev.create_table(f"demo.silver.{name}", schema=schema).append(written)

    [newest] = catalog.log("dev", limit=1)
    assert newest.meta["kind"] == "external" and newest.meta["tables"] == ["demo.silver.two"]
    assert {c.table for c in catalog.diff("dev")} == {"demo.silver.one", "demo.silver.two"}

    before = catalog.commit("dev")
    uuid = str(catalog.load_table("dev", "demo.silver.one").metadata.table_uuid)
    change = [{"identifier": {"namespace": ["demo", "silver"], "name": name},
               "requirements": [{"type": "assert-table-uuid", "uuid": u}],
               "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
              for name, u in (("one", uuid), ("two", "00000000-0000-0000-0000-000000000000"))]
    response = server.request("POST", "dev", "/transactions/commit", json={"table-changes": change})
    assert response.status_code == 409 and response.json()["error"]["message"].startswith("RAT-REST-007")
    assert catalog.commit("dev").pointers == before.pointers

    with pytest.raises(ForbiddenError, match="RAT-REST-006"):
        server.pyiceberg("main").create_table("demo.silver.three", schema=schema)

    result = catalog.merge("dev")
    assert sorted(result.tables) == ["demo.silver.one", "demo.silver.two"]
    rows = server.pyiceberg("main").load_table("demo.silver.one").scan().to_arrow()
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == written.to_pylist()
