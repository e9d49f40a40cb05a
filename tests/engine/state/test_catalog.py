"""The embedded branch catalog against a real SQLite file and real Iceberg tables (PyIceberg + pyarrow, no Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from ratui.engine.state.catalog import SqliteBranchCatalog
from ratui.engine.state.db import open_db
from ratui.engine.errors import RatuiError

REPO = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
ORDERS = "shop.silver.orders"
USERS = "shop.silver.users"


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def location(root: Path, key: str) -> Path:
    namespace, layer, name = key.split(".")
    return root / namespace / "warehouse" / layer / name


def make_table(cat: SqliteBranchCatalog, root: Path, ref: str, key: str, *ids: int) -> None:
    table = cat.create_table(ref, key, SCHEMA, location(root, key))
    if ids:
        table.append(rows(*ids))
    cat.record_commit(ref, f"create {key}")


def append(cat: SqliteBranchCatalog, ref: str, key: str, *ids: int) -> None:
    cat.load_table(ref, key).append(rows(*ids))
    cat.record_commit(ref, f"append to {key}")


def ids(cat: SqliteBranchCatalog, ref: str, key: str) -> list[int]:
    return sorted(cat.load_table(ref, key).scan().to_arrow()["id"].to_pylist())


def snapshot_id(cat: SqliteBranchCatalog, ref: str, key: str) -> int | None:
    snap = cat.load_table(ref, key).current_snapshot()
    return snap.snapshot_id if snap else None


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and ".ratui" not in p.parts}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "project"


@pytest.fixture
def cat(root: Path) -> SqliteBranchCatalog:
    catalog = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    make_table(catalog, root, "main", ORDERS, 1, 2)
    make_table(catalog, root, "main", USERS, 10)
    return catalog


def test_open_creates_main_and_is_idempotent(root: Path, cat: SqliteBranchCatalog) -> None:
    main = cat.get_ref("main")
    assert main.fork_hash is None
    again = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    assert again.get_ref("main") == main  # reopening neither resets main nor adds an init commit
    assert [c.message for c in again.log("main")][-1] == "init"
    assert len([c for c in again.log("main") if c.message == "init"]) == 1
    with open_db(root / ".ratui" / "ratui.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_branch_copies_pointers_and_branch_writes_leave_main_alone(cat: SqliteBranchCatalog) -> None:
    main_before = cat.table_pointers("main")
    ref = cat.create_branch("run-1", run_id="1")
    assert ref.run_id == "1" and ref.fork_hash == cat.get_ref("main").head
    assert cat.table_pointers("run-1") == main_before
    assert cat.iceberg("run-1").load_namespace_properties(("shop", "silver")) == {"exists": "true"}
    assert {r.name for r in cat.list_refs()} == {"main", "run-1"}
    assert cat.list_refs()[0].name == "main"

    append(cat, "run-1", ORDERS, 3)

    assert ids(cat, "run-1", ORDERS) == [1, 2, 3]
    assert ids(cat, "main", ORDERS) == [1, 2]
    assert cat.table_pointers("main") == main_before
    assert cat.table_pointers("run-1")[ORDERS] != main_before[ORDERS]


def test_merge_makes_main_see_the_branch_snapshot(cat: SqliteBranchCatalog) -> None:
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


def test_previous_metadata_location_is_set_by_merge(root: Path, cat: SqliteBranchCatalog) -> None:
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


def test_same_table_on_two_branches_conflicts(cat: SqliteBranchCatalog) -> None:
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


def test_merge_swap_is_guarded_by_the_fork_location(root: Path, cat: SqliteBranchCatalog) -> None:
    # The conflict check and the swap share one transaction, so only a bug could reach a stale swap; the
    # compare-and-swap must still refuse it rather than overwrite main.
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


def test_direct_commit_on_main_after_fork_conflicts(cat: SqliteBranchCatalog) -> None:
    cat.create_branch("run-a")
    append(cat, "run-a", ORDERS, 100)
    append(cat, "main", ORDERS, 7)  # main moves on its own
    with pytest.raises(RatuiError) as err:
        cat.merge("run-a")
    assert err.value.code == "RAT-CAT-003"
    assert ids(cat, "main", ORDERS) == [1, 2, 7]  # main's own commit survived


def test_different_tables_on_two_branches_both_merge(cat: SqliteBranchCatalog) -> None:
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


def test_table_created_on_branch_appears_on_main(root: Path, cat: SqliteBranchCatalog) -> None:
    key = "crm.gold.accounts"  # a namespace main has never seen
    cat.create_branch("run-1")
    make_table(cat, root, "run-1", key, 1, 2, 3)
    assert not cat.table_exists("main", key)

    result = cat.merge("run-1")

    assert result.tables == [key]
    assert cat.table_exists("main", key)
    assert ids(cat, "main", key) == [1, 2, 3]
    # The namespace's own rows came along (namespaces are per catalog name in PyIceberg's SqlCatalog).
    assert cat.iceberg("main").load_namespace_properties(("crm", "gold")) == {"exists": "true"}


def test_table_dropped_on_branch_is_dropped_on_main(root: Path, cat: SqliteBranchCatalog) -> None:
    cat.create_branch("run-1")
    files_before = files_under(root)
    cat.iceberg("run-1").drop_table(("shop", "silver", "users"))
    assert [(c.table, c.change) for c in cat.diff("run-1")] == [(USERS, "dropped")]
    cat.merge("run-1")
    assert not cat.table_exists("main", USERS)
    assert cat.table_exists("main", ORDERS)
    assert files_under(root) == files_before


def test_merge_without_changes_records_nothing(cat: SqliteBranchCatalog) -> None:
    head = cat.get_ref("main").head
    cat.create_branch("run-1")
    result = cat.merge("run-1")
    assert result.tables == [] and result.commit is None
    assert cat.get_ref("main").head == head


def test_dry_run_changes_nothing_and_reports_conflicts(cat: SqliteBranchCatalog) -> None:
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


def test_delete_branch_keeps_log_and_files(root: Path, cat: SqliteBranchCatalog) -> None:
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
    with open_db(root / ".ratui" / "ratui.db") as conn:
        assert conn.execute("SELECT count(*) FROM iceberg_tables WHERE catalog_name = 'run-1'").fetchone()[0] == 0
        assert (
            conn.execute("SELECT count(*) FROM iceberg_namespace_properties WHERE catalog_name = 'run-1'").fetchone()[0]
            == 0
        )
        assert conn.execute("SELECT count(*) FROM catalog_fork_pointers WHERE ref = 'run-1'").fetchone()[0] == 0
    assert cat.log("run-1") == log_before
    assert ids(cat, "main", ORDERS) == [1, 2]
    # The name can be used again, starting fresh from main.
    cat.create_branch("run-1")
    assert cat.table_pointers("run-1") == cat.table_pointers("main")


def test_stale_writer_cannot_commit_to_a_deleted_branch(root: Path, cat: SqliteBranchCatalog) -> None:
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
    with open_db(root / ".ratui" / "ratui.db") as conn:
        assert conn.execute("SELECT count(*) FROM iceberg_tables WHERE catalog_name = 'run-1'").fetchone()[0] == 0
    assert cat.table_pointers("main") == cat.log("main", limit=1)[0].pointers


def test_deleting_main_is_refused(cat: SqliteBranchCatalog) -> None:
    with pytest.raises(RatuiError) as err:
        cat.delete_branch("main")
    assert err.value.code == "RAT-CAT-004"
    assert cat.table_exists("main", ORDERS)


def test_unknown_refs_and_tables(cat: SqliteBranchCatalog) -> None:
    for call in (lambda: cat.get_ref("nope"), lambda: cat.delete_branch("nope"), lambda: cat.iceberg("nope"),
                 lambda: cat.log("nope"), lambda: cat.merge("nope")):
        with pytest.raises(RatuiError) as err:
            call()
        assert err.value.code == "RAT-CAT-002"
    with pytest.raises(RatuiError) as err:
        cat.load_table("main", "shop.silver.missing")
    assert err.value.code == "RAT-CAT-005"
    assert not cat.table_exists("main", "shop.silver.missing")


def test_bad_branch_requests(cat: SqliteBranchCatalog) -> None:
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


def test_log_is_newest_first_along_the_parent_chain(cat: SqliteBranchCatalog) -> None:
    fork = cat.get_ref("main").head
    cat.create_branch("run-1")
    append(cat, "run-1", ORDERS, 3)
    append(cat, "run-1", ORDERS, 4)

    log = cat.log("run-1")

    assert [c.message for c in log[:3]] == [
        f"append to {ORDERS}",
        f"append to {ORDERS}",
        "create branch run-1 from main",
    ]
    assert log[0].hash == cat.get_ref("run-1").head
    for newer, older in zip(log, log[1:]):
        assert newer.parent == older.hash
    assert log[2].parent == fork  # the branch's history continues into main's
    assert log[-1].message == "init" and log[-1].parent is None
    assert log[0].pointers == cat.table_pointers("run-1")
    assert log[1].pointers[ORDERS] != log[0].pointers[ORDERS]
    assert len(cat.log("run-1", limit=2)) == 2


def test_a_branchs_own_log_stops_where_it_was_created(cat: SqliteBranchCatalog) -> None:
    """What ratui asks of a branch (where it came from, which runs it holds) is read from its own commits and the
    one it was created at, not from the whole history of main behind it."""
    for i in range(5):
        cat.record_commit("main", f"main {i}")
    fork = cat.get_ref("main").head
    cat.create_branch("dev")
    append(cat, "dev", ORDERS, 3)
    cat.record_commit("main", "main after the fork")
    own = cat.log("dev", limit=100_000, own=True)
    assert [c.message for c in own] == [f"append to {ORDERS}", "create branch dev from main", "main 4"]
    assert own[-1].hash == fork and own[-1].ref == "main"
    assert cat.log("dev", limit=100_000)[:3] == own  # the same commits as the whole log begins with
    assert [c.message for c in cat.log("dev", limit=2, own=True)] == [f"append to {ORDERS}",
                                                                      "create branch dev from main"]
    # a branch of a branch: its own commits, then the commit of dev it was created at
    cat.create_branch("feature", from_ref="dev")
    assert [c.message for c in cat.log("feature", own=True)] == ["create branch feature from dev",
                                                                   f"append to {ORDERS}"]


def test_diff_lists_added_and_modified_with_locations(root: Path, cat: SqliteBranchCatalog) -> None:
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


def test_in_tx_hook_commits_or_rolls_back_with_the_merge(root: Path, cat: SqliteBranchCatalog) -> None:
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


def test_threads_branch_write_and_merge_different_tables(root: Path, cat: SqliteBranchCatalog) -> None:
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


def test_two_processes_merge_different_tables_concurrently(root: Path, cat: SqliteBranchCatalog) -> None:
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
