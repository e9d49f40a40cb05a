"""The branch catalog against real Iceberg tables (PyIceberg + pyarrow, no Spark), on both backends: the embedded
SQLite catalog and a real Nessie server (Nessie's own runner jar, one per module, emptied between tests).

Where Nessie's semantics differ, the Nessie assertion follows Nessie and the test says how; the SQLite assertions
stay as they are. Tests of SQLite-only mechanics (its rows, its one transaction, two processes on one file) run on
the embedded catalog only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pytest

from ratui.engine.state.catalog import BranchCatalog, SqliteBranchCatalog
from ratui.engine.state.db import open_db
from ratui.engine.errors import RatuiError

REPO = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
ORDERS = "shop.silver.orders"
USERS = "shop.silver.users"
# What PyIceberg's own commit of a table is called on Nessie, where each table write is a commit of its own.
UPDATE_ORDERS = f"update table {ORDERS}"


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def location(root: Path, key: str) -> Path:
    namespace, layer, name = key.split(".")
    return root / namespace / "warehouse" / layer / name


def make_table(cat: BranchCatalog, root: Path, ref: str, key: str, *ids: int) -> None:
    table = cat.create_table(ref, key, SCHEMA, location(root, key))
    if ids:
        table.append(rows(*ids))
    cat.record_commit(ref, f"create {key}")


def append(cat: BranchCatalog, ref: str, key: str, *ids: int) -> None:
    cat.load_table(ref, key).append(rows(*ids))
    cat.record_commit(ref, f"append to {key}")


def ids(cat: BranchCatalog, ref: str, key: str) -> list[int]:
    return sorted(cat.load_table(ref, key).scan().to_arrow()["id"].to_pylist())


def snapshot_id(cat: BranchCatalog, ref: str, key: str) -> int | None:
    snap = cat.load_table(ref, key).current_snapshot()
    return snap.snapshot_id if snap else None


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and ".ratui" not in p.parts}



@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "project"


@pytest.fixture(params=["sqlite", "nessie"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def opener(backend: str, root: Path, request: pytest.FixtureRequest) -> Callable[[], BranchCatalog]:
    """Opens the backend's catalog of this test's project (again: a second client of the same store)."""
    if backend == "sqlite":
        return lambda: SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import reset

    uri = request.getfixturevalue("nessie_uri")
    reset(uri)
    return lambda: NessieBranchCatalog(uri, root / ".ratui" / "ratui.db", root)


@pytest.fixture
def cat(opener: Callable[[], BranchCatalog], root: Path) -> BranchCatalog:
    catalog = opener()
    make_table(catalog, root, "main", ORDERS, 1, 2)
    make_table(catalog, root, "main", USERS, 10)
    return catalog


@pytest.fixture
def sqlite_cat(root: Path) -> SqliteBranchCatalog:
    """The embedded catalog alone, for the tests of its own mechanics."""
    catalog = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    make_table(catalog, root, "main", ORDERS, 1, 2)
    make_table(catalog, root, "main", USERS, 10)
    return catalog


def test_open_creates_main_and_is_idempotent(root: Path, backend: str, opener, cat: BranchCatalog) -> None:
    """On Nessie main is Nessie's own; an empty one gets the "init" commit (Nessie merges nothing into its empty
    beginning)."""
    main = cat.get_ref("main")
    assert main.fork_hash is None
    again = opener()
    assert again.get_ref("main") == main  # reopening neither resets main nor adds an init commit
    assert [c.message for c in again.log("main")][-1] == "init"
    assert again.log("main")[-1].parent is None
    assert len([c for c in again.log("main") if c.message == "init"]) == 1
    if backend == "sqlite":
        with open_db(root / ".ratui" / "ratui.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_branch_copies_pointers_and_branch_writes_leave_main_alone(backend: str, cat: BranchCatalog) -> None:
    """On Nessie a namespace is a NAMESPACE content without properties (SqlCatalog writes an "exists" property)."""
    main_before = cat.table_pointers("main")
    ref = cat.create_branch("run-1", run_id="1")
    assert ref.run_id == "1" and ref.fork_hash == cat.get_ref("main").head
    assert cat.table_pointers("run-1") == main_before
    if backend == "sqlite":
        assert cat.iceberg("run-1").load_namespace_properties(("shop", "silver")) == {"exists": "true"}
    else:
        assert cat.iceberg("run-1").load_namespace_properties(("shop", "silver")) == {}
    assert {r.name for r in cat.list_refs()} == {"main", "run-1"}
    assert cat.list_refs()[0].name == "main"

    append(cat, "run-1", ORDERS, 3)

    assert ids(cat, "run-1", ORDERS) == [1, 2, 3]
    assert ids(cat, "main", ORDERS) == [1, 2]
    assert cat.table_pointers("main") == main_before
    assert cat.table_pointers("run-1")[ORDERS] != main_before[ORDERS]


def test_merge_makes_main_see_the_branch_snapshot(cat: BranchCatalog) -> None:
    """On Nessie the merge commit also has the branch head as a second parent; `parent` is the first."""
    old_main_head = cat.get_ref("main").head
    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3, 4)
    branch_snapshot = snapshot_id(cat, "run-1", ORDERS)

    result = cat.merge("run-1")

    assert result.tables == [ORDERS] and result.conflicts == [] and not result.dry_run
    assert snapshot_id(cat, "main", ORDERS) == branch_snapshot
    assert ids(cat, "main", ORDERS) == [1, 2, 3, 4]
    assert cat.table_pointers("main")[ORDERS] == cat.table_pointers("run-1")[ORDERS]
    main = cat.get_ref("main")
    assert result.commit is not None and main.head == result.commit.hash
    assert result.commit.parent == old_main_head
    assert result.commit.pointers == cat.table_pointers("main")
    # main keeps working after the merge: a new commit on main builds on the merged state.
    append(cat, "main", ORDERS, 5)
    assert ids(cat, "main", ORDERS) == [1, 2, 3, 4, 5]


def test_previous_metadata_location_is_set_by_merge(root: Path, sqlite_cat: SqliteBranchCatalog) -> None:
    # SQLite only: PyIceberg's iceberg_tables rows (Nessie keeps a table's history in its commit log instead)
    cat = sqlite_cat
    fork_location = cat.table_pointers("main")[ORDERS]
    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3)
    cat.merge("run-1")
    with open_db(root / ".ratui" / "ratui.db") as conn:
        prev = conn.execute(
            "SELECT previous_metadata_location FROM iceberg_tables WHERE catalog_name = 'main'"
            " AND table_name = 'orders'"
        ).fetchone()[0]
    assert prev == fork_location


def test_same_table_on_two_branches_conflicts(cat: BranchCatalog) -> None:
    cat.create_branch("run-a")
    cat.create_branch("run-b")
    append(cat, "run-a", ORDERS, 100)
    append(cat, "run-b", ORDERS, 200)

    cat.merge("run-a")
    main_after_a = cat.table_pointers("main")
    head_after_a = cat.get_ref("main").head

    with pytest.raises(RatuiError) as err:
        cat.merge("run-b")
    assert err.value.code == "RAT-CAT-003"
    assert err.value.details == {"tables": [ORDERS]}
    assert cat.table_pointers("main") == main_after_a
    assert cat.get_ref("main").head == head_after_a
    assert ids(cat, "main", ORDERS) == [1, 2, 100]


def test_merge_swap_is_guarded_by_the_fork_location(root: Path, sqlite_cat: SqliteBranchCatalog) -> None:
    # SQLite only: the embedded merge's own compare-and-swap (on Nessie the merge is Nessie's).
    # The conflict check and the swap share one transaction, so only a bug could reach a stale swap; the
    # compare-and-swap must still refuse it rather than overwrite main.
    cat = sqlite_cat
    from ratui.engine.state.catalog import TableChange
    from ratui.engine.state.db import write_tx

    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3)
    main_before = cat.table_pointers("main")
    stale = TableChange(ORDERS, "modified", cat.table_pointers("run-1")[ORDERS], None, "/not/main/any/more", False)
    with pytest.raises(RatuiError) as err, open_db(root / ".ratui" / "ratui.db") as conn, write_tx(conn):
        cat._apply(conn, "run-1", "main", stale)
    assert err.value.code == "RAT-CAT-003"
    assert cat.table_pointers("main") == main_before


def test_direct_commit_on_main_after_fork_conflicts(cat: BranchCatalog) -> None:
    cat.create_branch("run-a")
    append(cat, "run-a", ORDERS, 100)
    append(cat, "main", ORDERS, 7)  # main moves on its own
    with pytest.raises(RatuiError) as err:
        cat.merge("run-a")
    assert err.value.code == "RAT-CAT-003"
    assert ids(cat, "main", ORDERS) == [1, 2, 7]  # main's own commit survived


def test_different_tables_on_two_branches_both_merge(cat: BranchCatalog) -> None:
    cat.create_branch("run-a")
    cat.create_branch("run-b")
    append(cat, "run-a", ORDERS, 3)
    append(cat, "run-b", USERS, 11)

    assert cat.merge("run-a").tables == [ORDERS]
    assert cat.merge("run-b").tables == [USERS]

    assert ids(cat, "main", ORDERS) == [1, 2, 3]
    assert ids(cat, "main", USERS) == [10, 11]
    assert [c.message.split(":")[0] for c in cat.log("main", limit=2)] == [
        "merge run-b into main",
        "merge run-a into main",
    ]


def test_table_created_on_branch_appears_on_main(root: Path, backend: str, cat: BranchCatalog) -> None:
    key = "crm.gold.accounts"  # a namespace main has never seen
    cat.create_branch("run-1")
    make_table(cat, root, "run-1", key, 1, 2, 3)
    assert not cat.table_exists("main", key)

    result = cat.merge("run-1")

    assert result.tables == [key]
    assert cat.table_exists("main", key)
    assert ids(cat, "main", key) == [1, 2, 3]
    # The namespace came along (per catalog name in PyIceberg's SqlCatalog; NAMESPACE contents on Nessie).
    if backend == "sqlite":
        assert cat.iceberg("main").load_namespace_properties(("crm", "gold")) == {"exists": "true"}
    else:
        assert cat.iceberg("main").namespace_exists(("crm", "gold"))
        assert cat.iceberg("main").namespace_exists(("crm",))


def test_table_dropped_on_branch_is_dropped_on_main(root: Path, cat: BranchCatalog) -> None:
    cat.create_branch("run-1")
    files_before = files_under(root)
    cat.iceberg("run-1").drop_table(("shop", "silver", "users"))
    assert [(c.table, c.change) for c in cat.diff("run-1")] == [(USERS, "dropped")]
    cat.merge("run-1")
    assert not cat.table_exists("main", USERS)
    assert cat.table_exists("main", ORDERS)
    assert files_under(root) == files_before


def test_merge_without_changes_records_nothing(cat: BranchCatalog) -> None:
    head = cat.get_ref("main").head
    cat.create_branch("run-1")
    result = cat.merge("run-1")
    assert result.tables == [] and result.commit is None
    assert cat.get_ref("main").head == head


def test_dry_run_changes_nothing_and_reports_conflicts(cat: BranchCatalog) -> None:
    cat.create_branch("run-a")
    cat.create_branch("run-b")
    append(cat, "run-a", ORDERS, 100)
    append(cat, "run-b", ORDERS, 200)
    append(cat, "run-b", USERS, 11)

    clean = cat.merge("run-a", dry_run=True)
    assert clean.dry_run and clean.tables == [ORDERS] and clean.conflicts == [] and clean.commit is None
    assert ids(cat, "main", ORDERS) == [1, 2]  # the dry run applied nothing

    cat.merge("run-a")
    main_pointers = cat.table_pointers("main")
    head = cat.get_ref("main").head

    report = cat.merge("run-b", dry_run=True)
    assert report.conflicts == [ORDERS]
    assert report.tables == [ORDERS, USERS]
    assert cat.table_pointers("main") == main_pointers
    assert cat.get_ref("main").head == head


def test_delete_branch_keeps_log_and_files(root: Path, backend: str, cat: BranchCatalog) -> None:
    """On Nessie a deleted branch's commits are no longer reachable by its name: its log is RAT-CAT-002."""
    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3)
    log_before = cat.log("run-1")
    files_before = files_under(root)
    assert any("/metadata/" in str(p) for p in files_before)

    cat.delete_branch("run-1")

    assert files_under(root) == files_before
    assert "run-1" not in {r.name for r in cat.list_refs()}
    with pytest.raises(RatuiError) as err:
        cat.table_pointers("run-1")
    assert err.value.code == "RAT-CAT-002"
    if backend == "sqlite":
        with open_db(root / ".ratui" / "ratui.db") as conn:
            assert conn.execute("SELECT count(*) FROM iceberg_tables WHERE catalog_name = 'run-1'").fetchone()[0] == 0
            assert (
                conn.execute("SELECT count(*) FROM iceberg_namespace_properties WHERE catalog_name = 'run-1'"
                             ).fetchone()[0] == 0
            )
            assert conn.execute("SELECT count(*) FROM catalog_fork_pointers WHERE ref = 'run-1'").fetchone()[0] == 0
        assert cat.log("run-1") == log_before
    else:
        with pytest.raises(RatuiError) as err:
            cat.log("run-1")
        assert err.value.code == "RAT-CAT-002"
    assert ids(cat, "main", ORDERS) == [1, 2]
    # The name can be used again, starting fresh from main.
    cat.create_branch("run-1")
    assert cat.table_pointers("run-1") == cat.table_pointers("main")


def test_stale_writer_cannot_commit_to_a_deleted_branch(root: Path, backend: str, cat: BranchCatalog) -> None:
    cat.create_branch("run-1")
    table = cat.load_table("run-1", ORDERS)
    held = cat.iceberg("run-1")
    cat.delete_branch("run-1")
    with pytest.raises(RatuiError) as err:
        table.append(rows(9))
    assert err.value.code == "RAT-CAT-002"
    with pytest.raises(RatuiError) as err:
        held.create_table(("shop", "silver", "ghost"), SCHEMA, location=str(root / "ghost"))
    assert err.value.code == "RAT-CAT-002"
    if backend == "sqlite":
        with open_db(root / ".ratui" / "ratui.db") as conn:
            assert conn.execute("SELECT count(*) FROM iceberg_tables WHERE catalog_name = 'run-1'").fetchone()[0] == 0
    assert "run-1" not in {r.name for r in cat.list_refs()}
    assert cat.table_pointers("main") == cat.log("main", limit=1)[0].pointers


def test_deleting_main_is_refused(cat: BranchCatalog) -> None:
    with pytest.raises(RatuiError) as err:
        cat.delete_branch("main")
    assert err.value.code == "RAT-CAT-004"
    assert cat.table_exists("main", ORDERS)


def test_unknown_refs_and_tables(cat: BranchCatalog) -> None:
    for call in (lambda: cat.get_ref("nope"), lambda: cat.delete_branch("nope"), lambda: cat.iceberg("nope"),
                 lambda: cat.log("nope"), lambda: cat.merge("nope")):
        with pytest.raises(RatuiError) as err:
            call()
        assert err.value.code == "RAT-CAT-002"
    with pytest.raises(RatuiError) as err:
        cat.load_table("main", "shop.silver.missing")
    assert err.value.code == "RAT-CAT-005"
    assert not cat.table_exists("main", "shop.silver.missing")


def test_bad_branch_requests(cat: BranchCatalog) -> None:
    cat.create_branch("run-1")
    with pytest.raises(RatuiError) as err:
        cat.create_branch("run-1")
    assert err.value.code == "RAT-CAT-001"
    with pytest.raises(RatuiError) as err:
        cat.create_branch("bad name/x")
    assert err.value.code == "RAT-CAT-006"
    with pytest.raises(RatuiError) as err:
        cat.merge("main", into="run-1")
    assert err.value.code == "RAT-CAT-007"


def test_log_is_newest_first_along_the_parent_chain(backend: str, cat: BranchCatalog) -> None:
    """On Nessie each table write is a commit of its own (PyIceberg's), under the one record_commit adds."""
    fork = cat.get_ref("main").head
    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3)
    append(cat, "run-1", ORDERS, 4)

    log = cat.log("run-1")

    if backend == "sqlite":
        expected = [f"append to {ORDERS}", f"append to {ORDERS}", "create branch run-1 from main"]
    else:
        expected = [f"append to {ORDERS}", UPDATE_ORDERS, f"append to {ORDERS}", UPDATE_ORDERS,
                    "create branch run-1 from main"]
    created = len(expected) - 1
    assert [c.message for c in log[:len(expected)]] == expected
    assert log[0].hash == cat.get_ref("run-1").head
    for newer, older in zip(log, log[1:]):
        assert newer.parent == older.hash
    assert log[created].parent == fork  # the branch's history continues into main's
    assert log[-1].message == "init" and log[-1].parent is None
    assert log[0].pointers == cat.table_pointers("run-1")
    assert log[created - 1].pointers[ORDERS] != log[0].pointers[ORDERS]
    assert log[created].pointers == cat.table_pointers("main")
    assert len(cat.log("run-1", limit=2)) == 2


def test_a_branchs_own_log_stops_where_it_was_created(backend: str, cat: BranchCatalog) -> None:
    """What ratui asks of a branch (where it came from, which runs it holds) is read from its own commits and the
    one it was created at, not from the whole history of main behind it. On Nessie the table's own commit is among
    the branch's commits (see the log test)."""
    write = [f"append to {ORDERS}"] + ([UPDATE_ORDERS] if backend == "nessie" else [])
    for i in range(5):
        cat.record_commit("main", f"main {i}")
    fork = cat.get_ref("main").head
    cat.create_branch("dev")
    append(cat, "dev", ORDERS, 3)
    cat.record_commit("main", "main after the fork")
    own = cat.log("dev", limit=100_000, own=True)
    assert [c.message for c in own] == [*write, "create branch dev from main", "main 4"]
    assert own[-1].hash == fork and own[-1].ref == "main"
    assert cat.log("dev", limit=100_000)[:len(own)] == own  # the same commits as the whole log begins with
    assert [c.message for c in cat.log("dev", limit=len(write) + 1, own=True)] == [*write,
                                                                                   "create branch dev from main"]
    # a branch of a branch: its own commits, then the commit of dev it was created at
    cat.create_branch("feature", from_ref="dev")
    assert [c.message for c in cat.log("feature", own=True)] == ["create branch feature from dev",
                                                                   f"append to {ORDERS}"]


def test_diff_lists_added_and_modified_with_locations(root: Path, cat: BranchCatalog) -> None:
    fork = cat.table_pointers("main")
    cat.create_branch("run-1")
    assert cat.diff("run-1") == []
    append(cat, "run-1", ORDERS, 3)
    make_table(cat, root, "run-1", "shop.gold.daily", 1)

    changes = {c.table: c for c in cat.diff("run-1")}

    assert set(changes) == {ORDERS, "shop.gold.daily"}
    modified, added = changes[ORDERS], changes["shop.gold.daily"]
    branch = cat.table_pointers("run-1")
    assert (modified.change, modified.branch_location, modified.main_location, modified.fork_location) == (
        "modified", branch[ORDERS], fork[ORDERS], fork[ORDERS])
    assert not modified.conflict
    assert (added.change, added.branch_location, added.main_location, added.fork_location) == (
        "added", branch["shop.gold.daily"], None, None)
    append(cat, "main", ORDERS, 7)
    assert {c.table: c.conflict for c in cat.diff("run-1")} == {ORDERS: True, "shop.gold.daily": False}


def test_in_tx_hook_commits_or_rolls_back_with_the_merge(root: Path, sqlite_cat: SqliteBranchCatalog) -> None:
    # SQLite only: the hook shares the merge's SQLite transaction (on Nessie it runs after Nessie's merge: see
    # test_nessie_in_tx_runs_after_nessie_accepted)
    cat = sqlite_cat
    with open_db(root / ".ratui" / "ratui.db") as conn:
        conn.execute("CREATE TABLE ledger (run TEXT)")
    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3)
    main_before = cat.table_pointers("main")

    def failing(conn, result):
        conn.execute("INSERT INTO ledger VALUES ('run-1')")
        raise RuntimeError("ledger broke")

    with pytest.raises(RuntimeError):
        cat.merge("run-1", in_tx=failing)
    assert cat.table_pointers("main") == main_before

    cat.merge("run-1", in_tx=lambda conn, result: conn.execute("INSERT INTO ledger VALUES (?)", (result.ref,)))
    with open_db(root / ".ratui" / "ratui.db") as conn:
        assert conn.execute("SELECT run FROM ledger").fetchall() == [("run-1",)]
    assert ids(cat, "main", ORDERS) == [1, 2, 3]


def test_threads_branch_write_and_merge_different_tables(root: Path, cat: BranchCatalog) -> None:
    keys = [f"shop.bronze.t{i}" for i in range(4)]
    for key in keys:
        make_table(cat, root, "main", key, 0)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            name = f"run-t{i}"
            cat.create_branch(name)
            append(cat, name, keys[i], i + 1)
            cat.merge(name)
            cat.delete_branch(name)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(keys))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i, key in enumerate(keys):
        assert ids(cat, "main", key) == [0, i + 1]
    assert [r.name for r in cat.list_refs()] == ["main"]


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import pyarrow as pa
    from ratui.engine.state.catalog import SqliteBranchCatalog

    root, branch, key, value = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    cat = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    cat.create_branch(branch)
    cat.load_table(branch, key).append(pa.table({"id": [value], "v": ["x"]}, schema=pa.schema(
        [pa.field("id", pa.int64()), pa.field("v", pa.string())])))
    cat.record_commit(branch, "write")
    print("ready", flush=True)
    sys.stdin.readline()  # wait until both processes are ready, then merge at the same moment
    print(cat.merge(branch).commit.hash, flush=True)
    """
)


def test_two_processes_merge_different_tables_concurrently(root: Path, sqlite_cat: SqliteBranchCatalog) -> None:
    # SQLite only: two processes on one SQLite file (on Nessie, every client is another process already)
    cat = sqlite_cat
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root), branch, key, str(value)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for branch, key, value in (("run-p1", ORDERS, 100), ("run-p2", USERS, 200))
    ]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert line.strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]

    assert ids(cat, "main", ORDERS) == [1, 2, 100]
    assert ids(cat, "main", USERS) == [10, 200]
    merge_hashes = {out.strip() for out, _ in outs}
    assert {c.hash for c in cat.log("main", limit=2)} == merge_hashes  # both merges are on main's chain


# ---------------------------------------------------------------------------------------------------- Nessie only

@pytest.fixture
def nessie(nessie_uri: str, root: Path) -> BranchCatalog:
    """The Nessie catalog of an emptied server, with the two tables on main."""
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import reset

    reset(nessie_uri)
    catalog = NessieBranchCatalog(nessie_uri, root / ".ratui" / "ratui.db", root)
    make_table(catalog, root, "main", ORDERS, 1, 2)
    make_table(catalog, root, "main", USERS, 10)
    return catalog


def other_client_put(uri: str, ref: str, key: str, location: str, **fields: object) -> None:
    """Another Nessie client (plain HTTP) points `key` on `ref` at `location` (and sets `fields` of the content),
    keeping the content id."""
    import requests

    head = requests.get(f"{uri}/trees/{ref}", timeout=10).json()["reference"]["hash"]
    content = requests.get(f"{uri}/trees/{ref}/contents/{key}", timeout=10).json()["content"]
    body = {"commitMeta": {"message": "another client"},
            "operations": [{"type": "PUT", "key": {"elements": key.split(".")},
                            "content": {**content, "metadataLocation": location, **fields}}]}
    requests.post(f"{uri}/trees/{ref}@{head}/history/commit", json=body, timeout=10).raise_for_status()


def test_nessie_unreachable_is_a_coded_error_and_fast(root: Path) -> None:
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import free_port

    uri = f"http://127.0.0.1:{free_port()}/api/v2"
    started = time.monotonic()
    with pytest.raises(RatuiError) as err:
        NessieBranchCatalog(uri, root / ".ratui" / "ratui.db", root)
    assert err.value.code == "RAT-NES-001"
    assert uri in err.value.message and err.value.hint
    assert time.monotonic() - started < 5


def test_nessie_stopped_mid_run_is_a_coded_error(root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A server of its own, stopped while a catalog uses it: every call is RAT-NES-001, quickly."""
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog
    from tests.nessie_server import nessie_server

    with nessie_server(tmp_path_factory.mktemp("nessie-stopped")) as uri:
        catalog = NessieBranchCatalog(uri, root / ".ratui" / "ratui.db", root)
        make_table(catalog, root, "main", ORDERS, 1)
        catalog.create_branch("run-1")
        held = catalog.load_table("run-1", ORDERS)
    started = time.monotonic()
    for call in (lambda: catalog.create_branch("run-2"), lambda: held.append(rows(2)), lambda: catalog.merge("run-1"),
                 lambda: catalog.list_refs()):
        with pytest.raises(RatuiError) as err:
            call()
        assert err.value.code == "RAT-NES-001" and uri in err.value.message
    assert time.monotonic() - started < 10


def test_nessie_wrong_uri_names_it(nessie_uri: str, root: Path) -> None:
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog

    server = nessie_uri.removesuffix("/api/v2")
    for wrong in (server + "/api/v1", server, server + "/iceberg"):
        with pytest.raises(RatuiError) as err:
            NessieBranchCatalog(wrong, root / ".ratui" / "ratui.db", root)
        assert err.value.code == "RAT-NES-002", (wrong, err.value)
        assert wrong in err.value.message
        assert "api/v2" in err.value.hint


def test_nessie_token_is_sent_and_never_shown(nessie_uri: str, root: Path) -> None:
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog

    catalog = NessieBranchCatalog(nessie_uri, root / ".ratui" / "ratui.db", root, token="s3cr3t-t0ken")
    assert catalog._api._session.headers["Authorization"] == "Bearer s3cr3t-t0ken"
    assert "s3cr3t" not in repr(catalog) and "s3cr3t" not in repr(catalog._api)
    catalog.list_refs()  # a server without authentication ignores it


def test_nessie_ref_moved_by_another_client_between_read_and_commit(nessie_uri: str, root: Path,
                                                                    nessie: BranchCatalog) -> None:
    """A table is loaded, then the branch moves under it before the write: a commit of another table by another
    client does not stop it (Nessie checks per key); another installation's write to the same table is not lost
    (the stale table's commit is refused, and PyIceberg writes again on top of the other one); a change of the
    table's content that the metadata does not show is caught by Nessie itself (the commit carries the hash the
    table was loaded at); a rollback computed before the move is refused (RAT-CAT-003) and changes nothing."""
    import requests
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import SetPropertiesUpdate

    from ratui.engine.state.catalog.nessie import NessieBranchCatalog

    nessie.create_branch("run-1")
    held = nessie.load_table("run-1", ORDERS)
    other_client_put(nessie_uri, "run-1", USERS, nessie.table_pointers("main")[USERS])  # the ref moves
    held.append(rows(3))
    assert ids(nessie, "run-1", ORDERS) == [1, 2, 3]

    held = nessie.load_table("run-1", ORDERS)
    second = NessieBranchCatalog(nessie_uri, root / ".ratui" / "other.db", root)  # another installation
    second.load_table("run-1", ORDERS).append(rows(4))
    held.append(rows(5))
    assert ids(nessie, "run-1", ORDERS) == [1, 2, 3, 4, 5]

    held = nessie.load_table("run-1", ORDERS)
    content = requests.get(f"{nessie_uri}/trees/run-1/contents/{ORDERS}", timeout=10).json()["content"]
    # the same metadata file, another Nessie value (the snapshot id another engine's client wrote)
    other_client_put(nessie_uri, "run-1", ORDERS, content["metadataLocation"], snapshotId=-1)
    with pytest.raises(CommitFailedException):
        held.catalog.commit_table(held, (), (SetPropertiesUpdate(updates={"owner": "me"}),))
    assert "owner" not in nessie.load_table("run-1", ORDERS).properties

    before = nessie.table_pointers("run-1")[ORDERS]
    main = nessie.table_pointers("main")[ORDERS]
    second.load_table("run-1", ORDERS).append(rows(6))
    with pytest.raises(RatuiError) as err:
        nessie.restore("run-1", {ORDERS: main}, {ORDERS: before}, "roll back")
    assert err.value.code == "RAT-CAT-003" and err.value.details == {"tables": [ORDERS]}
    assert ids(nessie, "run-1", ORDERS) == [1, 2, 3, 4, 5, 6]


def test_nessie_merge_after_main_moved_meanwhile_conflicts(nessie_uri: str, nessie: BranchCatalog) -> None:
    """main changed by another client after ratui read it: Nessie's own merge check finds the conflict."""
    nessie.create_branch("run-1")
    append(nessie, "run-1", ORDERS, 3)
    main_head = nessie.get_ref("main").head
    other_client_put(nessie_uri, "main", ORDERS, nessie.table_pointers("main")[USERS])
    moved = nessie.table_pointers("main")
    with pytest.raises(RatuiError) as err:
        nessie.merge("run-1")
    assert err.value.code == "RAT-CAT-003" and err.value.details == {"tables": [ORDERS]}
    assert nessie.table_pointers("main") == moved
    assert nessie.get_ref("main").head != main_head


def test_nessie_branch_deleted_by_another_client(nessie_uri: str, nessie: BranchCatalog) -> None:
    import requests

    nessie.create_branch("run-1")
    append(nessie, "run-1", ORDERS, 3)
    held = nessie.load_table("run-1", ORDERS)
    main = nessie.table_pointers("main")
    head = requests.get(f"{nessie_uri}/trees/run-1", timeout=10).json()["reference"]["hash"]
    requests.delete(f"{nessie_uri}/trees/run-1@{head}", timeout=10).raise_for_status()
    for call in (lambda: held.append(rows(9)), lambda: nessie.merge("run-1"),
                 lambda: nessie.load_table("run-1", ORDERS), lambda: nessie.record_commit("run-1", "x"),
                 lambda: nessie.delete_branch("run-1")):
        with pytest.raises(RatuiError) as err:
            call()
        assert err.value.code == "RAT-CAT-002"
    assert nessie.table_pointers("main") == main


def test_nessie_in_tx_runs_after_nessie_accepted(root: Path, nessie: BranchCatalog) -> None:
    """The ledger's writes cannot share a transaction with Nessie: they run right after it, on the project's
    database. A hook that fails leaves Nessie's merge in place (the gap nessie.py's docstring describes)."""
    with open_db(root / ".ratui" / "ratui.db") as conn:
        conn.execute("CREATE TABLE ledger (run TEXT)")
    nessie.create_branch("run-1", in_tx=lambda conn: conn.execute("INSERT INTO ledger VALUES ('fork')"))
    append(nessie, "run-1", ORDERS, 3)
    with pytest.raises(RuntimeError):
        nessie.merge("run-1", in_tx=lambda conn, result: (_ for _ in ()).throw(RuntimeError("ledger broke")))
    assert ids(nessie, "main", ORDERS) == [1, 2, 3]
    nessie.create_branch("run-2")
    append(nessie, "run-2", USERS, 11)
    nessie.merge("run-2", in_tx=lambda conn, result: conn.execute("INSERT INTO ledger VALUES (?)", (result.ref,)))
    with open_db(root / ".ratui" / "ratui.db") as conn:
        assert conn.execute("SELECT run FROM ledger ORDER BY rowid").fetchall() == [("fork",), ("run-2",)]


def test_nessie_commit_properties_carry_ratui_meta(nessie_uri: str, nessie: BranchCatalog) -> None:
    """ratui's facts about a commit are Nessie commit properties: another Nessie client reads them in the log."""
    import requests

    nessie.create_branch("run-7", run_id="7")
    append(nessie, "run-7", ORDERS, 3)
    result = nessie.merge("run-7", meta={"kind": "run", "run_id": "7", "runs": ["7"]})
    assert result.commit is not None and result.commit.meta == {"kind": "run", "run_id": "7", "runs": ["7"]}
    assert nessie.get_ref("main").head == result.commit.hash
    entry = requests.get(f"{nessie_uri}/trees/main/history", params={"max-records": 1}, timeout=10).json()
    props = entry["logEntries"][0]["commitMeta"]["allProperties"]  # API v2: every property a list of values
    assert props["ratui.run_id"] == ["7"] and props["ratui.kind"] == ["run"] and props["ratui.ref"] == ["main"]
    ref = next(r for r in nessie.list_refs() if r.name == "run-7")
    assert ref.run_id == "7"
    # a rollback is one commit of Nessie operations on top of the history
    before = nessie.log("main", limit=5)[1].pointers
    commit = nessie.restore("main", {ORDERS: before[ORDERS]}, {ORDERS: result.commit.pointers[ORDERS]}, "roll back",
                            {"kind": "rollback"})
    assert commit.parent == result.commit.hash and commit.meta == {"kind": "rollback"}
    assert ids(nessie, "main", ORDERS) == [1, 2]
