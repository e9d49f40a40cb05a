"""Garbage collection across branches (issue 35, item 4): the files of a dropped table and of a deleted branch are
reclaimed once no live ref, no kept commit inside the retention window and no branch deleted inside it reaches
them - never before, and never a file another live ref shares. Real SQLite catalog, real Iceberg files written with
PyIceberg (no Spark). Ages are simulated: file mtimes and the catalog's recorded times moved back, never slept for.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from ratui.cli import main
from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.state.catalog.base import MAIN
from tests.engine.ops.test_reaper import age_catalog, age_tree, create_table, files_under, project, rows

WINDOW = "  orphan_file_max_age_hours: 24\n  snapshot_max_age_days: 7\n"


def write(engine: Engine, ref: str, key: str, n: int, start: int) -> set[str]:
    """Append `n` rows on `ref` (the table made there first if absent) and record the commit, as a run does;
    the files the write made."""
    before = files_under(engine.root / "demo/warehouse")
    if key not in engine.state.catalog.table_pointers(ref):
        create_table(engine, key, ref)
    engine.state.catalog.load_table(ref, key).append(rows(n, start))
    engine.state.catalog.record_commit(ref, f"wrote {key}")
    return {os.path.realpath(p) for p in files_under(engine.root / "demo/warehouse") - before}


def drop(engine: Engine, ref: str, key: str) -> None:
    """Drop the table on `ref` as the REST catalog's DROP TABLE does: a commit without it, no file touched."""
    location = engine.state.catalog.table_pointers(ref)[key]
    engine.state.catalog.restore(ref, {key: None}, {key: location}, f"drop {key}")


def ids(engine: Engine, ref: str, key: str) -> list[int]:
    return sorted(engine.state.catalog.load_table(ref, key).scan().to_arrow().column("id").to_pylist())


def pass_(engine: Engine, dry_run: bool = False):
    report = engine.reaper().run(dry_run=dry_run, tasks=["orphan_files"])
    assert report.ok, report.errors
    return report.tasks["orphan_files"]


def paths(engine: Engine, items) -> set[str]:
    return {os.path.realpath(engine.root / i["path"]) for i in items}


# ------------------------------------------------------------------------------------------- dropped table


def test_a_table_dropped_on_main_is_reclaimed_after_the_window_not_before(tmp_path):
    engine = project(tmp_path, WINDOW)
    gone, kept = "demo.bronze.old_orders", "demo.bronze.items"
    gone_files = write(engine, MAIN, gone, 3, 0) | write(engine, MAIN, gone, 2, 10)
    write(engine, MAIN, kept, 2, 0)
    age_catalog(engine, days=10)  # the tables were made 10 days ago
    last = engine.state.catalog.table_pointers(MAIN)[gone]
    drop(engine, MAIN, gone)
    age_tree(tmp_path / "demo/warehouse", 24 * 10)
    assert gone not in engine.state.catalog.table_pointers(MAIN)
    last_state = state_files(last, whole=False)
    assert last_state < gone_files and any(p.endswith(".parquet") for p in last_state)

    # dropped just now, 3 days ago: main's state when the window opened still holds the table, and a time-travel
    # read of it needs its last state (what came before it, out of the window, is a plain orphan)
    for days in (0, 3):
        age_catalog(engine, days=days)
        task = pass_(engine)
        assert paths(engine, task.removed) <= gone_files - last_state
        assert {i["kind"] for i in task.removed} <= {"orphan"}
        assert all(os.path.exists(p) for p in last_state)
        assert sorted(engine.state.catalog.static_table(last).scan().to_arrow().column("id").to_pylist()) == \
            [0, 1, 2, 10, 11]

    # 8 days after the drop (the window is 7): a dry run lists what is left of the table, then the real pass frees it
    age_catalog(engine, days=5)
    gone_files = {p for p in gone_files if os.path.exists(p)}
    dry = pass_(engine, dry_run=True)
    assert paths(engine, dry.found) == gone_files
    assert {(i["kind"], i["table"]) for i in dry.found} == {("dropped_table", gone)}
    assert dry.bytes_found == sum(os.path.getsize(p) for p in gone_files)
    assert dry.stats["by_kind"]["dropped_table"] == {"files": len(gone_files), "bytes": dry.bytes_found}
    assert all(os.path.exists(p) for p in gone_files)
    real = pass_(engine)
    assert paths(engine, real.removed) == gone_files and real.bytes_freed == dry.bytes_found
    assert not (tmp_path / "demo/warehouse/bronze/old_orders").exists()  # its folders too
    assert ids(engine, MAIN, kept) == [0, 1]
    assert pass_(engine, dry_run=True).found == []


# ------------------------------------------------------------------------------------------ deleted branch


def test_a_deleted_branch_is_reclaimed_but_what_main_or_a_live_branch_shares_stays(tmp_path):
    engine = project(tmp_path, WINDOW)
    key = "demo.bronze.items"
    main_files = write(engine, MAIN, key, 2, 0)
    catalog = engine.state.catalog
    catalog.create_branch("feature")
    shared = write(engine, "feature", key, 1, 100)  # also reached by "follow-up", made from feature next
    catalog.create_branch("follow-up", from_ref="feature")
    own = write(engine, "feature", key, 1, 200) | write(engine, "feature", "demo.silver.extra", 2, 300)
    age_tree(tmp_path / "demo/warehouse", 48)
    catalog.delete_branch("feature")

    # deleted inside the window: a real pass keeps every file of it (undoing the deletion needs them)
    assert pass_(engine).removed == []
    assert all(os.path.exists(p) for p in own | shared | main_files)

    age_catalog(engine, days=8)
    dry = pass_(engine, dry_run=True)
    assert paths(engine, dry.found) == own
    assert {(i["kind"], i["ref"]) for i in dry.found} == {("deleted_branch", "feature")}
    real = pass_(engine)
    assert paths(engine, real.removed) == own
    assert all(os.path.exists(p) for p in shared | main_files)
    assert ids(engine, "follow-up", key) == [0, 1, 100] and ids(engine, MAIN, key) == [0, 1]


def test_a_kept_commit_inside_the_window_keeps_its_files(tmp_path):
    """main moved on (the table rebuilt: a new table at the same place): the commit of 3 days ago, inside the
    window, still reads the old table, and so does the one of 10 days ago, in force when the window opened; the
    one of 12 days ago, out of it, keeps nothing of its own."""
    engine = project(tmp_path, WINDOW)
    key = "demo.bronze.items"
    catalog = engine.state.catalog
    oldest = write(engine, MAIN, key, 1, 0)
    age_catalog(engine, days=2)
    in_force = write(engine, MAIN, key, 1, 5)
    age_catalog(engine, days=7)
    middle = write(engine, MAIN, key, 1, 10)  # 3 days ago after the shift below
    age_catalog(engine, days=3)
    # a rebuild: a new table at the same place (what a --full-refresh with a new partitioning does)
    location = catalog.table_pointers(MAIN)[key]
    catalog.restore(MAIN, {key: None}, {key: location}, "drop for rebuild")
    newest = write(engine, MAIN, key, 1, 20)
    age_tree(tmp_path / "demo/warehouse", 48)
    middle_state = catalog.log(MAIN, 10)[2]  # the write of 3 days ago: the rebuild's two commits are newer
    assert middle_state.message == f"wrote {key}"

    task = pass_(engine)
    removed = paths(engine, task.removed)
    # the oldest commit's metadata files and its manifest list go (nothing kept reads them any more); the data file
    # it wrote stays: the later commits' snapshots still hold it
    assert removed and removed < oldest and not removed & (in_force | middle | newest)
    assert all(os.path.exists(p) for p in in_force | middle | newest)
    assert all(p.endswith((".metadata.json", ".avro")) for p in removed)
    assert sorted(catalog.static_table(middle_state.pointers[key]).scan().to_arrow().column("id").to_pylist()) \
        == [0, 5, 10]
    assert ids(engine, MAIN, key) == [20]
    assert {i["kind"] for i in task.removed} == {"orphan"}  # the table's folder is still in use


def test_cli_reap_dry_run_groups_what_it_would_reclaim(tmp_path, capsys):
    engine = project(tmp_path, WINDOW)
    write(engine, MAIN, "demo.bronze.items", 1, 0)
    write(engine, MAIN, "demo.bronze.old_orders", 2, 0)
    drop(engine, MAIN, "demo.bronze.old_orders")
    engine.state.catalog.create_branch("feature")
    write(engine, "feature", "demo.bronze.items", 1, 10)
    engine.state.catalog.delete_branch("feature")
    junk = tmp_path / "demo/warehouse/bronze/items/data/junk.parquet"
    junk.write_bytes(b"0123456789")
    age_tree(tmp_path / "demo/warehouse", 48)
    age_catalog(engine, days=8)
    engine.close()

    assert main(["reap", "--project", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dropped table demo.bronze.old_orders:" in out
    assert "deleted branch feature:" in out
    assert "orphan: 1 file(s), 10 B" in out
    assert out.index("dropped table") < out.index("deleted branch") < out.index("orphan: 1")
    assert junk.exists()


# ---------------------------------------------------------------------------------------- property test

TABLES = ("demo.bronze.t0", "demo.silver.t1")
BRANCHES = ("b0", "b1")
GC_OPS = st.lists(st.one_of(
    st.tuples(st.just("branch"), st.integers(0, 1), st.integers(0, 2)),  # branch b_i from main / b0 / b1
    st.tuples(st.just("write"), st.integers(0, 2), st.integers(0, 1)),  # on main / b0 / b1, table t_j
    st.tuples(st.just("write"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("merge"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("drop"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("delete"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("age"), st.just(0), st.just(0)),
), min_size=3, max_size=12)
DAY = 24 * 3600


class Model:
    """Which table states are kept, from the operations alone: every live ref's current tables (whole); every commit
    of a live ref or of a branch deleted inside the window that was made inside the window, and the one in force
    when the window opened (its current snapshot); a branch deleted inside the window as a live ref. Times are
    model days; the window is 7 days. What a state's files are is read from its metadata with PyIceberg's own
    inspect tables (never the reaper's marker)."""

    def __init__(self) -> None:
        self.now = 0
        self.history: dict[str, list[tuple[int, dict[str, str]]]] = {MAIN: [(0, {})]}
        self.deleted: list[tuple[int, dict[str, str], list[tuple[int, dict[str, str]]]]] = []

    def committed(self, ref: str, pointers: dict[str, str]) -> None:
        self.history[ref].append((self.now, dict(pointers)))

    def kept(self) -> tuple[set[str], set[str]]:
        """(metadata locations kept whole, metadata locations kept as a past commit's state)."""
        since = self.now - 7
        whole: set[str] = set()
        past: set[str] = set()

        def window(commits: list[tuple[int, dict[str, str]]]) -> None:
            for at, pointers in reversed(commits):
                past.update(pointers.values())
                if at < since:
                    break

        for commits in self.history.values():
            whole.update(commits[-1][1].values())
            window(commits)
        for at, pointers, commits in self.deleted:
            if at >= since:
                whole.update(pointers.values())
                window(commits)
        return whole, past


def state_files(location: str, whole: bool) -> set[str]:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(location)
    out = {location}
    if whole:
        out.update(e.metadata_file for e in table.metadata.metadata_log)
        out.update(s.manifest_list for s in table.metadata.snapshots)
        if table.metadata.snapshots:
            out.update(table.inspect.all_manifests().column("path").to_pylist())
            out.update(table.inspect.all_files().column("file_path").to_pylist())
    elif table.current_snapshot() is not None:
        out.add(table.current_snapshot().manifest_list)
        out.update(table.inspect.manifests().column("path").to_pylist())
        out.update(table.inspect.files().column("file_path").to_pylist())
    return {os.path.realpath(p.removeprefix("file://")) for p in out}


def shift_files(folder: Path, seconds: float) -> None:
    for p in Path(folder).rglob("*"):
        if p.is_file():
            st_ = p.stat()
            os.utime(p, (st_.st_atime - seconds, st_.st_mtime - seconds))


@hsettings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))  # ~0.2 s each: no Spark
@given(ops=GC_OPS)
def test_property_the_sweep_deletes_exactly_what_nothing_kept_reaches(ops):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        engine = project(root, WINDOW)
        catalog = engine.state.catalog
        model = Model()
        counter = iter(range(0, 10_000_000, 10))
        warehouse = root / "demo/warehouse"

        def refs() -> set[str]:
            return {r.name for r in catalog.list_refs()}

        def record(ref: str) -> None:
            model.committed(ref, catalog.table_pointers(ref))

        ref_of = (MAIN, *BRANCHES)
        # main starts with a table aged past the window, so every example has old files to judge
        write(engine, MAIN, TABLES[0], 1, next(counter))
        record(MAIN)
        for op, a, b in [("age", 0, 0), *ops]:
            if op == "branch" and BRANCHES[a] not in refs() and ref_of[b] in refs() and ref_of[b] != BRANCHES[a]:
                catalog.create_branch(BRANCHES[a], from_ref=ref_of[b])
                model.history[BRANCHES[a]] = list(model.history[ref_of[b]])
                record(BRANCHES[a])
            elif op == "write" and ref_of[a] in refs():
                write(engine, ref_of[a], TABLES[b], 1, next(counter))
                record(ref_of[a])
            elif op == "merge" and BRANCHES[a] in refs():
                try:
                    merged = catalog.merge(BRANCHES[a])
                except RatuiError as exc:
                    assert exc.code == "RAT-CAT-003"
                else:
                    if merged.commit is not None:
                        record(MAIN)
            elif op == "drop" and ref_of[a] in refs() and TABLES[b] in catalog.table_pointers(ref_of[a]):
                drop(engine, ref_of[a], TABLES[b])
                record(ref_of[a])
            elif op == "delete" and BRANCHES[a] in refs():
                pointers = catalog.table_pointers(BRANCHES[a])
                catalog.delete_branch(BRANCHES[a])
                model.deleted.append((model.now, pointers, model.history.pop(BRANCHES[a])))
            elif op == "age":  # 8 days pass for everything there is
                age_catalog(engine, days=8)
                shift_files(warehouse, 8 * DAY)
                model.now += 8
        whole, past = model.kept()
        reachable = set().union(*(state_files(loc, True) for loc in whole),
                                *(state_files(loc, False) for loc in past - whole))
        before = {os.path.realpath(p) for p in files_under(warehouse)}
        old = {p for p in before if os.path.getmtime(p) < time.time() - 24 * 3600}
        expected = old - reachable
        contents = {ref: {key: ids(engine, ref, key) for key in catalog.table_pointers(ref)} for ref in refs()}

        task = pass_(engine)
        after = {os.path.realpath(p) for p in files_under(warehouse)}
        assert not reachable & (before - after), "a kept file was deleted"
        assert before - after == expected
        assert paths(engine, task.removed) == expected
        assert {ref: {key: ids(engine, ref, key) for key in catalog.table_pointers(ref)} for ref in refs()} == contents
        engine.close()


@pytest.mark.parametrize("days", [3, 8])
def test_a_branch_deleted_before_deletions_were_recorded_counts_by_its_last_commit(tmp_path, days):
    """A database of an earlier ratui has no deletion rows: such a branch counts as deleted at its last commit."""
    import sqlite3
    from contextlib import closing

    engine = project(tmp_path, WINDOW)
    write(engine, MAIN, "demo.bronze.items", 1, 0)
    engine.state.catalog.create_branch("old-feature")
    own = write(engine, "old-feature", "demo.bronze.items", 1, 100)
    engine.state.catalog.delete_branch("old-feature")
    with closing(sqlite3.connect(engine.settings.db_path)) as conn, conn:
        conn.execute("DELETE FROM catalog_deleted_refs")
    age_tree(tmp_path / "demo/warehouse", 48)
    age_catalog(engine, days=days)
    task = pass_(engine)
    assert paths(engine, task.removed) == (own if days > 7 else set())
