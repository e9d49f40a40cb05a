"""The landing ledger at scale (no Spark): a sync costs one write transaction of a bounded number of statements,
whatever the number of files, and a sync that finds nothing changed writes nothing. Counted with sqlite3's
statement trace, on zones of 100 and 2,000 files (issue 34: zones of 100,000 files; benchmarks/scale_landing.py
times those)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.landing.local import LocalZone
from ratui.engine.state.db import open_db, write_tx
from ratui.engine.state.ledger import Ledger
from tests.scale_project import fill_zone

P = "demo.bronze.events"
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class TracedLedger(Ledger):
    """The ledger, with every SQL statement its connections run recorded (sqlite3's trace callback)."""

    def __init__(self, db_path: Path):
        self.statements: list[str] = []
        super().__init__(db_path)
        self.statements.clear()

    def _conn(self):
        closing_ = super()._conn()
        closing_.conn.set_trace_callback(self.statements.append)
        return closing_

    def take(self) -> list[str]:
        out, self.statements = self.statements, []
        return [" ".join(s.split()).upper() for s in out]


def writes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith(WRITES)]


def short(statements: list[str]) -> list[str]:
    """Statements as an assertion shows them (one holding every row as JSON can be long)."""
    return [s[:100] for s in statements]


def transactions(statements: list[str]) -> int:
    return sum(1 for s in statements if s.startswith("BEGIN"))


def data_version(db: Path) -> tuple[int, int]:
    """(the database's change counter, its size): what another connection sees of a commit."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA data_version").fetchone()[0], os.path.getsize(db)
    finally:
        conn.close()


def sync_zone(tmp_path: Path, files: int) -> tuple[TracedLedger, LocalZone, dict[str, list[str]]]:
    """A zone of `files` files synced three ways: first, unchanged, and after a few changes."""
    folder = fill_zone(tmp_path / f"zone{files}", files)
    zone = LocalZone("demo", "events", folder)
    ledger = TracedLedger(tmp_path / f"state{files}.db")
    seen: dict[str, list[str]] = {}
    rows = ledger.sync("demo", "events", P, zone.list(), forget_missing=True)
    seen["first"] = ledger.take()
    assert len(rows) == files and {r.state for r in rows} == {"unloaded"}
    # every file loaded, as after a run's merge (inside the merge's transaction, on its connection)
    with closing(open_db(ledger.db_path)) as conn, write_tx(conn):
        conn.set_trace_callback(ledger.statements.append)
        ledger.mark_loaded(conn, "r1", [("demo", "events", P, r.file) for r in rows])
    seen["mark_loaded"] = ledger.take()
    return ledger, zone, seen


@pytest.mark.parametrize("files", [100, 2_000])
def test_a_merge_marks_its_files_loaded_with_a_few_statements_on_main_and_on_a_branch(tmp_path, files):
    ledger, zone, seen = sync_zone(tmp_path, files)
    assert len(writes(seen["mark_loaded"])) == 1 and len(seen["mark_loaded"]) <= 5, short(seen["mark_loaded"])
    assert {r.state for r in ledger.files("demo", "events", P)} == {"loaded"}
    # on a branch: its own loads, every file once (one of them archived meanwhile: matched by its archived name)
    moved = zone.archive(["part-000000.csv"], "r2")
    ledger.mark_archived("demo", "events", "r2", moved, [P], "zone/_processed/r2")
    ledger.take()
    with closing(open_db(ledger.db_path)) as conn, write_tx(conn):
        conn.set_trace_callback(ledger.statements.append)
        ledger.mark_loaded(conn, "r3", [("demo", "events", P, f"part-{i:06d}.csv") for i in range(files)], ref="dev")
    statements = ledger.take()
    assert len(writes(statements)) == 1 and len(statements) <= 3, short(statements)
    on_dev = ledger.on_ref("dev", ledger.files("demo", "events", P))
    assert len(on_dev) == files and {e.state for e in on_dev} == {"loaded"}
    assert {e.run_id for e in on_dev} == {"r3"}


@pytest.mark.parametrize("files", [100, 2_000])
def test_a_sync_is_one_transaction_of_a_few_statements_whatever_the_number_of_files(tmp_path, files):
    ledger, zone, seen = sync_zone(tmp_path, files)
    first = seen["first"]
    assert transactions(first) == 1
    # the same statements for 100 files as for 2,000: none per file
    assert len(first) <= 8, short(first)
    assert len(writes(first)) == 1

    # a new file, a rewritten one, a removed one and one copied without its time (same bytes): one transaction
    folder = zone.folder
    (folder / "zz-new.csv").write_text("id,amount,category,updated_at\n1,1.5,Cat1,2026-01-01 00:00:00\n")
    (folder / "part-000001.csv").write_text("id,amount,category,updated_at\n9,9.5,Cat0,2026-01-01 00:00:00\n")
    (folder / "part-000002.csv").unlink()
    os.utime(folder / "part-000003.csv", ns=(10**18, 10**18))
    rows = {r.file: r for r in ledger.sync("demo", "events", P, zone.list(), forget_missing=True)}
    changed = ledger.take()
    assert transactions(changed) == 1 and len(changed) <= 10, short(changed)
    assert rows["zz-new.csv"].state == "unloaded"
    assert rows["part-000001.csv"].state == "unloaded"  # rewritten: a new file for the ledger
    assert "part-000002.csv" not in rows  # landing_mode all: the zone is the truth
    assert rows["part-000003.csv"].state == "loaded" and rows["part-000003.csv"].mtime_ns == 10**18  # same bytes
    assert sum(1 for r in rows.values() if r.state == "loaded") == files - 2
    assert [r.file for r in ledger.unloaded("demo", ["events"], P)] == ["part-000001.csv", "zz-new.csv"]


@pytest.mark.parametrize("files", [100, 2_000])
def test_a_sync_that_finds_nothing_changed_writes_nothing(tmp_path, files):
    ledger, zone, _seen = sync_zone(tmp_path, files)
    before = data_version(ledger.db_path)
    rows = ledger.sync("demo", "events", P, zone.list(), forget_missing=True)
    statements = ledger.take()
    assert len(rows) == files and {r.state for r in rows} == {"loaded"}
    assert writes(statements) == [] and transactions(statements) == 0, short(statements)
    assert len(statements) <= 2
    assert data_version(ledger.db_path) == before
    # the rows it returns are the ledger's, as files() reads them
    assert rows == ledger.files("demo", "events", P)


def test_a_copy_of_the_zone_without_times_keeps_every_file_loaded(tmp_path):
    """`cp -r` of the zone (new times, same bytes): the ledger sees the same files, in one transaction."""
    ledger, zone, _seen = sync_zone(tmp_path, 300)
    with closing(open_db(ledger.db_path)) as conn, write_tx(conn):
        ledger.fork(conn, "main", "dev")  # a branch that loaded them too
    copy = tmp_path / "copy"
    shutil.copytree(zone.folder, copy, copy_function=shutil.copyfile)  # times not kept
    ledger.take()
    rows = ledger.sync("demo", "events", P, LocalZone("demo", "events", copy).list(), forget_missing=True)
    statements = ledger.take()
    assert {r.state for r in rows} == {"loaded"}
    assert {e.state for e in ledger.on_ref("dev", rows)} == {"loaded"}  # the branch's loads took the new times
    assert transactions(statements) == 1 and len(statements) <= 10, short(statements)


def test_the_listing_refuses_a_name_the_ledger_cannot_carry(tmp_path):
    folder = fill_zone(tmp_path / "zone", 3)
    zone = LocalZone("demo", "events", folder)
    weird = folder / "two\nlines.csv"
    weird.write_text("id\n1\n")
    with pytest.raises(RatuiError) as caught:
        zone.list()
    assert caught.value.code == "RAT-LND-012" and "two\\nlines.csv" in str(caught.value)
    weird.unlink()
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.csv"), "wb") as fh:  # Linux names are bytes: any go
        fh.write(b"id\n1\n")
    with pytest.raises(RatuiError) as caught:
        zone.list()
    assert caught.value.code == "RAT-LND-012" and "not valid UTF-8" in str(caught.value)


def test_the_listing_reports_a_broken_or_looping_symlink_and_leaves_out_what_is_not_a_file(tmp_path):
    folder = fill_zone(tmp_path / "zone", 3)
    zone = LocalZone("demo", "events", folder)
    (folder / "sub").mkdir()
    (folder / "dirlink").symlink_to(folder / "sub")
    (folder / "good.csv").symlink_to(folder / "part-000000.csv")
    assert [e.name for e in zone.list()] == ["good.csv", "part-000000.csv", "part-000001.csv", "part-000002.csv"]
    (folder / "loop.csv").symlink_to(folder / "loop.csv")
    with pytest.raises(RatuiError) as caught:
        zone.list()
    assert caught.value.code == "RAT-LND-008"
    (folder / "loop.csv").unlink()
    (folder / "gone.csv").symlink_to(folder / "nowhere.csv")
    with pytest.raises(RatuiError) as caught:
        zone.list()
    assert caught.value.code == "RAT-LND-008" and "broken symlink" in str(caught.value)
    # the whole path of the link and where it leads (the folder is scanned through its descriptor)
    assert caught.value.file == str(folder / "gone.csv") and str(folder / "nowhere.csv") in str(caught.value)


def test_a_listed_entry_is_the_file_with_its_path_and_survives_a_pickle(tmp_path):
    """A listing's entries are made in C with their paths made when asked for: each equals (and hashes as) the
    entry made from the file's own stat, its path is the file's, and it crosses a process boundary (pickled for an
    isolated pipeline) with its path."""
    import pickle

    from ratui.engine.landing.entry import entry_of

    folder = fill_zone(tmp_path / "zone", 3)
    listed = LocalZone("demo", "events", folder).list()
    made = [entry_of(folder / e.name) for e in listed]
    assert listed == made and {hash(e) for e in listed} == {hash(e) for e in made}
    assert [e.path for e in listed] == [folder / f"part-00000{i}.csv" for i in range(3)]
    assert listed[0].size == (folder / "part-000000.csv").stat().st_size and listed[0].etag is None
    back = pickle.loads(pickle.dumps(listed))
    assert back == listed and [e.path for e in back] == [e.path for e in listed]
    moved = listed[0]._replace(size=listed[0].size + 1)
    assert moved != listed[0] and moved.path == listed[0].path and "path=" in repr(moved)


def test_files_that_come_and_go_while_the_zone_is_synced(tmp_path):
    """The listing is what the sync records: a file removed after it is still a row (its bytes unread, no digest),
    the next sync forgets it (landing_mode all); a file that arrives after it is the next sync's."""
    folder = fill_zone(tmp_path / "zone", 5)
    zone = LocalZone("demo", "events", folder)
    ledger = Ledger(tmp_path / "state.db")
    listed = zone.list()
    (folder / "part-000001.csv").unlink()
    (folder / "late.csv").write_text("id\n9\n")
    rows = {r.file: r for r in ledger.sync("demo", "events", P, listed, forget_missing=True)}
    assert sorted(rows) == [f"part-{i:06d}.csv" for i in range(5)]
    rows = {r.file: r for r in ledger.sync("demo", "events", P, zone.list(), forget_missing=True)}
    assert "part-000001.csv" not in rows and rows["late.csv"].state == "unloaded"


def test_a_large_zones_digest_is_recorded_as_its_count_and_hash_and_still_compares_file_by_file():
    """A run records a zone of more than 1,000 files as {"files", "sha256"} (not megabytes per run); change
    detection tells the same files from any change, and a run recorded before (the whole list) still compares."""
    import json

    from ratui.engine.landing.entry import RECORDED_FILES_UP_TO, recorded_digest, same_digest

    big = [[f"part-{i:06d}.csv", 100 + i, 1_700_000_000_000_000_000 + i] for i in range(RECORDED_FILES_UP_TO + 1)]
    small = big[:10]
    recorded = json.loads(json.dumps(recorded_digest(big)))  # as stored in the run's inputs and read back
    assert recorded["files"] == len(big) and len(json.dumps(recorded)) < 200
    assert same_digest(recorded, [list(f) for f in big])
    touched = [list(f) for f in big]
    touched[500][2] += 1
    assert not same_digest(recorded, touched)
    assert not same_digest(recorded, big[:-1]) and not same_digest(recorded, small)
    assert json.loads(json.dumps(recorded_digest(small))) == small and same_digest(small, small)
    assert same_digest(json.loads(json.dumps(big)), big)  # recorded whole by an earlier ratui


def test_the_unchanged_shortcut_decides_as_the_full_comparison_does():
    """A sync first asks whether anything changed at all (dictionaries compared at once); whenever it says
    nothing did, the full per-file comparison must find nothing to write either, and whenever it says something
    did, the comparison must find it. Seeded random zones: local files and objects, archived rows, rows without a
    digest, retimed, resized, re-tagged, new and removed files, with and without forget_missing."""
    import random

    from ratui.engine.landing.zone import ZoneEntry
    from ratui.engine.state.ledger_sync_plan import SyncPlan, unchanged

    rng = random.Random(34)
    agreed = {True: 0, False: 0}
    for _ in range(3000):
        local = rng.random() < 0.6
        rows, items, digests = [], [], {}
        for i in range(rng.randint(0, 6)):
            name = f"_processed/r1/f{i}.csv" if rng.random() < 0.15 else f"f{i}.csv"
            size, mtime = rng.randint(1, 3), rng.randint(1, 3)
            digest = (f"d{i}" if rng.random() < 0.9 else None) if local else None
            etag, version = (None, None) if local else (f"e{rng.randint(1, 2)}", rng.choice([None, "v1"]))
            # LandingFile's fields in the order _read gives them (file, size, mtime_ns at 3, 4, 5), then
            # digest, etag, version
            rows.append(("ns", "zone", "p", name, size, mtime, "loaded", None, 0, None, None, None, None, None,
                         digest, etag, version))
            if name.startswith("_processed/") or rng.random() < 0.1:
                continue  # archived, or removed from the zone since
            change = rng.choice(["same", "same", "same", "size", "time", "etag", "version"])
            new_size = size + (change == "size")
            new_mtime = mtime + (change == "time")
            new_etag = etag if local or change != "etag" else etag + "x"
            new_version = version if local or change != "version" else "v2"
            items.append(ZoneEntry(name, new_size, new_mtime, new_etag, new_version,
                                   path=Path("/zone") / name if local else None))
        for i in range(rng.choice([0, 0, 0, 1])):
            items.append(ZoneEntry(f"new{i}.csv", 1, 1, None if local else "e", None,
                                   path=Path("/zone/new") if local else None))
        known = {r[3]: (r[4], r[5], *r[-3:]) for r in rows}
        for item in items:  # as _sync takes them: a kept digest, else the bytes' (the same bytes, or new ones)
            if item.path is None:
                continue
            row = known.get(item.name)
            if row is not None and row[:2] == (item.size, item.mtime_ns) and row[2]:
                digests[item.name] = row[2]
            else:
                digests[item.name] = row[2] if row is not None and rng.random() < 0.5 else "new"
        for forget in (False, True):
            full = SyncPlan(items, digests, known, forget).empty
            # as _read_brief gives them: no namespace, zone and pipeline; whether a digest is kept
            quick = unchanged(items, [r[3:14] + (r[-3] is not None, r[-2], r[-1]) for r in rows], forget)
            assert not quick or full, (rows, items, forget)  # said unchanged: truly nothing to write
            if full and all(r[-3] or not local for r in rows):
                assert quick, (rows, items, forget)  # nothing to write and nothing to digest: the shortcut sees it
            agreed[quick] += 1
    assert agreed[True] > 300 and agreed[False] > 300  # both answers were exercised
