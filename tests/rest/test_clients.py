"""Other engines on ratui's branches through `ratui serve`: PyIceberg's RestCatalog and DuckDB's iceberg extension read
every table of the sample at main and at a branch with the rows ratui's own query gives; a table PyIceberg creates
on a branch is a ratui commit that `ratui log`, `ratui diff` and `ratui merge` treat like a run's; main refuses
outside writes; a multi-table transaction with one failed requirement changes nothing."""

from __future__ import annotations

import datetime as dt
import glob
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from tests.rest.conftest import serve


BRANCH = "rest-read"  # main's tables, with one table changed by PyIceberg through the endpoint
CHANGED = "ecommerce.bronze.raw_products"


def canonical(value):
    """One comparable form for Spark's, PyArrow's and DuckDB's Python values (timestamps in local time, as Spark
    shows them)."""
    if isinstance(value, dt.datetime):
        return (value.astimezone().replace(tzinfo=None) if value.tzinfo else value).isoformat()
    if isinstance(value, (dt.date, dt.time, Decimal)):
        return str(value)
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if hasattr(value, "asDict"):  # a Spark Row (a struct column)
        return canonical(value.asDict())
    return value


def rows_of(columns: list[str], rows) -> list[str]:
    return sorted(json.dumps({c: canonical(v) for c, v in zip(columns, row)}, sort_keys=True, default=str)
                  for row in rows)


def arrow_rows(table: pa.Table) -> list[str]:
    return rows_of(table.column_names, [tuple(r.values()) for r in table.to_pylist()])


_QUERIED: dict[tuple[str, str], list[str]] = {}  # (key, ref) -> rows: each Spark query once for both clients


def ratui_rows(engine, key: str, ref: str) -> list[str]:
    """What `ratui query` answers: the engine's query over the ref's tables, every row."""
    if (key, ref) not in _QUERIED:
        columns, rows, truncated = engine.query(f"SELECT * FROM {key}", ref=ref, limit=10_000_000)
        assert not truncated
        _QUERIED[key, ref] = rows_of(columns, rows)
    return _QUERIED[key, ref]


@pytest.fixture(scope="module")
def served(rest_sample, sample_engine):
    sample_engine.create_branch(BRANCH)
    with serve(rest_sample["root"]) as server:
        # the branch differs from main: PyIceberg appends a copy of three rows of one table, through the endpoint
        table = server.pyiceberg(BRANCH).load_table(CHANGED)
        table.append(table.scan(limit=3).to_arrow())
        yield server


def _every_table(catalog, namespace=()) -> list[str]:
    found = [".".join((*ns, name)) for ns, name in ([(tuple(i[:-1]), i[-1]) for i in catalog.list_tables(namespace)]
                                                    if namespace else [])]
    for child in catalog.list_namespaces(namespace):
        found += _every_table(catalog, tuple(child))
    return sorted(found)


@pytest.mark.parametrize("ref", ["main", BRANCH])
def test_pyiceberg_reads_every_sample_table_with_the_rows_ratui_query_gives(served, rest_sample, sample_engine, ref):
    catalog = served.pyiceberg(ref)
    assert set(rest_sample["keys"]) <= set(_every_table(catalog))
    for key in rest_sample["keys"]:
        got = arrow_rows(catalog.load_table(key).scan().to_arrow())
        assert got == ratui_rows(sample_engine, key, ref), key
        assert got, key  # every sample table has rows
    main_rows = arrow_rows(served.pyiceberg("main").load_table(CHANGED).scan().to_arrow())
    branch_rows = arrow_rows(served.pyiceberg(BRANCH).load_table(CHANGED).scan().to_arrow())
    assert len(branch_rows) == len(main_rows) + 3  # the branch really is another state


def duckdb_connection(served, ref: str):
    """DuckDB with the iceberg extension loaded from the installed wheels (duckdb-extension-*: no download), attached
    to the ref's catalog URI with the token as an ICEBERG secret."""
    import duckdb

    site = Path(sys.modules["duckdb"].__file__).resolve().parent.parent
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for name in ("httpfs", "avro", "iceberg"):  # the REST client needs httpfs, manifests are Avro
        [path] = glob.glob(str(site / f"duckdb_extension_{name}" / "extensions" / "*" / f"{name}.duckdb_extension"))
        con.execute(f"LOAD '{path}'")
    con.execute(f"CREATE SECRET ratui_token (TYPE ICEBERG, TOKEN '{served.token}')")
    con.execute(f"ATTACH '{ref}' AS lake (TYPE ICEBERG, ENDPOINT '{served.url(ref)}', SECRET ratui_token)")
    return con


@pytest.mark.parametrize("ref", ["main", BRANCH])
def test_duckdb_reads_every_sample_table_with_the_rows_ratui_query_gives(served, rest_sample, sample_engine, ref):
    con = duckdb_connection(served, ref)
    try:
        for key in rest_sample["keys"]:
            namespace, name = key.rsplit(".", 1)
            result = con.execute(f'SELECT * FROM lake."{namespace}"."{name}"')
            columns = [d[0] for d in result.description]
            assert rows_of(columns, result.fetchall()) == ratui_rows(sample_engine, key, ref), key
    finally:
        con.close()


def cli(root: Path, *args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(root), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_a_table_pyiceberg_creates_on_a_branch_is_a_commit_that_diff_shows_and_merge_publishes(
        served, rest_sample, sample_engine):
    root = rest_sample["root"]
    sample_engine.create_branch("rest-dev")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("label", pa.string())])
    written = pa.table({"id": [1, 2, 3], "label": ["one", "two", "three"]}, schema=schema)
    catalog = served.pyiceberg("rest-dev")
    table = catalog.create_table("ecommerce.silver.from_outside", schema=schema)
    table.append(written)

    log = cli(root, "log", "--ref", "rest-dev", "--limit", "3")
    assert [e["kind"] for e in log[:2]] == ["external", "external"]
    assert "iceberg rest" in log[0]["message"] and "ecommerce.silver.from_outside" in log[0]["message"]
    diff = cli(root, "diff", "rest-dev")
    changed = {d["table"]: d for d in diff}
    assert list(changed) == ["ecommerce.silver.from_outside"], diff

    [merged] = cli(root, "merge", "rest-dev")
    assert merged["tables"] == ["ecommerce.silver.from_outside"]
    columns, rows, _ = sample_engine.query("SELECT id, label FROM ecommerce.silver.from_outside ORDER BY id")
    assert [dict(zip(columns, r)) for r in rows] == written.to_pylist()
    assert cli(root, "log", "--limit", "1")[0]["kind"] == "merge"


def test_a_write_to_main_from_outside_is_refused_in_the_rest_shape_and_main_is_unchanged(served, sample_engine):
    before = sample_engine.state.catalog.commit("main")
    catalog = served.pyiceberg("main")
    from pyiceberg.exceptions import ForbiddenError

    with pytest.raises(ForbiddenError, match="RAT-REST-006"):
        catalog.create_table("ecommerce.silver.not_on_main", schema=pa.schema([("id", pa.int64())]))
    table = catalog.load_table(CHANGED)
    with pytest.raises(ForbiddenError, match="RAT-REST-006"):
        table.append(table.scan(limit=1).to_arrow())
    response = served.request("DELETE", "main", "/namespaces/ecommerce%1Fbronze/tables/raw_products")
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "ForbiddenException"
    assert response.json()["error"]["message"].startswith("RAT-REST-006")
    after = sample_engine.state.catalog.commit("main")
    assert (after.hash, after.pointers) == (before.hash, before.pointers)


def test_a_past_state_is_readable_and_never_writable(served, rest_sample, sample_engine):
    commit = sample_engine.state.catalog.commit(BRANCH)
    ref = f"{BRANCH}@{commit.hash[:12]}"
    catalog = served.pyiceberg(ref)
    assert catalog.load_table(CHANGED).metadata_location == commit.pointers[CHANGED]
    response = served.request("POST", ref, "/namespaces", json={"namespace": ["elsewhere"]})
    assert response.status_code == 403 and response.json()["error"]["message"].startswith("RAT-REST-006")


def test_a_transaction_where_one_requirement_fails_changes_nothing(served, sample_engine):
    sample_engine.create_branch("rest-tx")
    catalog = sample_engine.state.catalog
    before = catalog.commit("rest-tx")
    first, second = "ecommerce.silver.clean_orders", "ecommerce.silver.clean_customers"
    uuid = {key: str(catalog.load_table("rest-tx", key).metadata.table_uuid) for key in (first, second)}

    def change(key: str, table_uuid: str) -> dict:
        namespace, name = key.rsplit(".", 1)
        return {"identifier": {"namespace": namespace.split("."), "name": name},
                "requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
                "updates": [{"action": "set-properties", "updates": {"touched.by": "rest-test"}}]}

    wrong = "00000000-0000-0000-0000-000000000000"
    response = served.request("POST", "rest-tx", "/transactions/commit",
                              json={"table-changes": [change(first, uuid[first]), change(second, wrong)]})
    assert response.status_code == 409, response.text
    assert response.json()["error"]["type"] == "CommitFailedException"
    assert response.json()["error"]["message"].startswith("RAT-REST-007")
    after = catalog.commit("rest-tx")
    assert (after.hash, after.pointers) == (before.hash, before.pointers)

    response = served.request("POST", "rest-tx", "/transactions/commit",
                              json={"table-changes": [change(first, uuid[first]), change(second, uuid[second])]})
    assert response.status_code == 204, response.text
    [commit] = catalog.log("rest-tx", limit=1)
    assert commit.meta["kind"] == "external" and commit.meta["tables"] == [second, first]
    assert sorted(k for k in commit.pointers if commit.pointers[k] != before.pointers[k]) == [second, first]
    for key in (first, second):
        assert catalog.load_table("rest-tx", key).properties["touched.by"] == "rest-test"
