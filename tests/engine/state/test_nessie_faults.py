"""Faults another Nessie client causes behind ratui's back, against a real Nessie server: a table dropped on main
while a run's branch still writes it, and a table dropped and created again under the same name (another content
id). Each is a coded error or Nessie's own conflict; main is what the other client left, nothing of the run lands.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from ratui.engine.errors import RatuiError
from ratui.engine.state.catalog import BranchCatalog
from tests.engine.state.test_catalog import ORDERS, USERS, append, ids, make_table, rows




@pytest.fixture
def nessie(nessie_uri: str, tmp_path: Path) -> BranchCatalog:
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import reset

    reset(nessie_uri)
    root = tmp_path / "project"
    catalog = NessieBranchCatalog(nessie_uri, root / ".ratui" / "ratui.db", root)
    make_table(catalog, root, "main", ORDERS, 1, 2)
    make_table(catalog, root, "main", USERS, 10)
    return catalog


def other_client(uri: str, ref: str, operations: list[dict]) -> None:
    head = requests.get(f"{uri}/trees/{ref}", timeout=10).json()["reference"]["hash"]
    body = {"commitMeta": {"message": "another client"}, "operations": operations}
    requests.post(f"{uri}/trees/{ref}@{head}/history/commit", json=body, timeout=10).raise_for_status()


def content(uri: str, ref: str, key: str) -> dict:
    return requests.get(f"{uri}/trees/{ref}/contents/{key}", timeout=10).json()["content"]


def drop(uri: str, ref: str, key: str) -> None:
    other_client(uri, ref, [{"type": "DELETE", "key": {"elements": key.split(".")}}])


def test_a_table_dropped_on_main_behind_a_runs_back(nessie_uri: str, nessie: BranchCatalog) -> None:
    nessie.create_branch("run-1")
    append(nessie, "run-1", ORDERS, 3)
    drop(nessie_uri, "main", ORDERS)
    left = nessie.table_pointers("main")
    assert ORDERS not in left
    # the preview names the table, the merge is Nessie's conflict, and main stays as the other client left it
    preview = nessie.merge("run-1", dry_run=True)
    assert preview.conflicts == [ORDERS]
    with pytest.raises(RatuiError) as err:
        nessie.merge("run-1")
    assert err.value.code == "RAT-CAT-003" and err.value.details == {"tables": [ORDERS]}
    assert nessie.table_pointers("main") == left

    # a table loaded on main before it was dropped there: its write is refused, the table does not come back
    held = nessie.load_table("main", USERS)
    drop(nessie_uri, "main", USERS)
    with pytest.raises(RatuiError) as err:
        held.append(rows(11))
    assert err.value.code == "RAT-CAT-005" and USERS in err.value.message
    assert USERS not in nessie.table_pointers("main")
    with pytest.raises(RatuiError) as err:
        nessie.load_table("main", USERS)
    assert err.value.code == "RAT-CAT-005"


def test_a_table_created_again_under_its_name_has_another_content_id(nessie_uri: str,
                                                                      nessie: BranchCatalog) -> None:
    nessie.create_branch("run-1")
    append(nessie, "run-1", ORDERS, 3)
    first = content(nessie_uri, "main", ORDERS)
    # another client drops the table and puts one of the same name back: Nessie gives it another content id
    drop(nessie_uri, "main", ORDERS)
    again = {k: v for k, v in first.items() if k != "id"}
    other_client(nessie_uri, "main", [{"type": "PUT", "key": {"elements": ORDERS.split(".")}, "content": again}])
    recreated = content(nessie_uri, "main", ORDERS)
    assert recreated["id"] != first["id"]
    left = nessie.table_pointers("main")
    with pytest.raises(RatuiError) as err:
        nessie.merge("run-1")
    assert err.value.code == "RAT-CAT-003" and err.value.details == {"tables": [ORDERS]}
    assert nessie.table_pointers("main") == left
    assert content(nessie_uri, "main", ORDERS)["id"] == recreated["id"]
    # a rollback computed against the old table is refused too (the pointer it expects is gone)
    with pytest.raises(RatuiError) as err:
        nessie.restore("main", {ORDERS: first["metadataLocation"]}, {ORDERS: "elsewhere"}, "roll back")
    assert err.value.code == "RAT-CAT-003"
    assert ids(nessie, "main", ORDERS) == [1, 2]


def test_content_ids_stay_the_same_across_branches_merges_and_rollbacks(nessie_uri: str,
                                                                       nessie: BranchCatalog) -> None:
    """A table is one Nessie content wherever it goes: a branch, a write on it, the merge back, a rollback."""
    first = content(nessie_uri, "main", ORDERS)
    nessie.create_branch("dev")
    append(nessie, "dev", ORDERS, 3)
    assert content(nessie_uri, "dev", ORDERS)["id"] == first["id"]
    assert content(nessie_uri, "dev", ORDERS)["metadataLocation"] != first["metadataLocation"]
    nessie.merge("dev")
    assert content(nessie_uri, "main", ORDERS)["id"] == first["id"]
    now = nessie.table_pointers("main")[ORDERS]
    nessie.restore("main", {ORDERS: first["metadataLocation"]}, {ORDERS: now}, "roll back")
    back = content(nessie_uri, "main", ORDERS)
    assert (back["id"], back["metadataLocation"]) == (first["id"], first["metadataLocation"])
    assert ids(nessie, "main", ORDERS) == [1, 2]
