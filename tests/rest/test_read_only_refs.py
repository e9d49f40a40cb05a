"""Which refs `ratui serve` lets outside engines write: main is read-only by default (only ratui's quality gate
publishes to it), `--read-only-ref REF` protects more refs, `--writable-main` lifts main's protection. Every kind of
write is refused on a protected ref, in the Iceberg REST shape (403 ForbiddenException, RAT-REST-006), leaving the
ref's head as it was: a namespace created, its properties updated or dropped, a table created, committed to,
renamed or dropped, a multi-table transaction; the same writes go through on a writable ref. No Spark: the table is
written with PyIceberg on the project's embedded catalog, and the servers are real `ratui serve` processes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from .conftest import Served, serve

NS = "demo%1Fsilver"  # the namespace demo.silver in a URL path (the REST spec's unit separator)
ORDERS = {"namespace": ["demo", "silver"], "name": "orders"}


@pytest.fixture
def project(tmp_path) -> Path:
    from ratui.engine.facade.engine import Engine

    root = tmp_path / "p"
    root.mkdir()
    (root / "ratui.yaml").write_text("namespace: demo\n")
    engine = Engine.open(root)
    catalog = engine.state.catalog
    catalog.create_table("main", "demo.silver.orders", pa.schema([("id", pa.int64())]),
                         catalog.table_location("demo.silver.orders")).append(pa.table({"id": [1, 2]}))
    catalog.record_commit("main", "write demo.silver.orders")
    catalog.create_branch("dev")
    engine.close()
    return root


def head(root: Path, ref: str) -> tuple[str, dict[str, str]]:
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    commit = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root).commit(ref)
    return commit.hash, commit.pointers


def writes(ref: str, tag: str) -> list[tuple[str, str, dict | None]]:
    """Every kind of write the REST catalog takes, each of its own (`tag` keeps the names apart between refs)."""
    table = f"/namespaces/{NS}/tables/orders"
    return [
        ("POST", "/namespaces", {"namespace": ["demo", f"made_{tag}"]}),
        ("POST", f"/namespaces/{NS}/properties", {"removals": [], "updates": {"owner": tag}}),
        ("POST", f"/namespaces/{NS}/tables", {"name": f"new_{tag}", "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False}]}}),
        ("POST", table, {"requirements": [], "updates": [{"action": "set-properties", "updates": {"by": tag}}]}),
        ("POST", "/transactions/commit", {"table-changes": [
            {"identifier": ORDERS, "requirements": [],
             "updates": [{"action": "set-properties", "updates": {"in_tx": tag}}]}]}),
        ("POST", "/tables/rename", {"source": ORDERS, "destination": {"namespace": ["demo", "silver"],
                                                                      "name": f"orders_{tag}"}}),
    ]


def refused_everywhere(server: Served, ref: str) -> None:
    before = head(server.root, ref)
    for method, path, body in [*writes(ref, "x"), ("DELETE", f"/namespaces/{NS}/tables/orders", None),
                               ("DELETE", f"/namespaces/{NS}", None)]:
        response = server.request(method, ref, path, json=body)
        assert response.status_code == 403, (method, path, response.text)
        error = response.json()["error"]
        assert error["type"] == "ForbiddenException" and error["message"].startswith("RAT-REST-006"), error
        assert f"'{ref}' is read-only here" in error["message"]
    assert head(server.root, ref) == before  # nothing of it reached the ref


def accepted_everywhere(server: Served, ref: str, tag: str) -> None:
    before = head(server.root, ref)
    for method, path, body in writes(ref, tag):
        response = server.request(method, ref, path, json=body)
        assert response.status_code in (200, 204), (method, path, response.text)
    hash_, pointers = head(server.root, ref)
    assert hash_ != before[0]
    assert f"demo.silver.orders_{tag}" in pointers and f"demo.silver.new_{tag}" in pointers
    assert "demo.silver.orders" not in pointers  # renamed
    assert server.pyiceberg(ref).load_namespace_properties(("demo", "silver"))["owner"] == tag


def test_by_default_main_refuses_every_outside_write_and_a_branch_takes_them(project):
    with serve(project) as server:
        refused_everywhere(server, "main")
        accepted_everywhere(server, "dev", "dev")
    assert "demo.silver.orders" in head(project, "main")[1]


def test_writable_main_and_a_read_only_ref(project):
    with serve(project, "--writable-main", "--read-only-ref", "dev") as server:
        refused_everywhere(server, "dev")
        accepted_everywhere(server, "main", "main")
