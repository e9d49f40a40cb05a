"""Landing facts carried by a table's snapshots (no Spark): what one installation loaded, another installation's
ledger takes in from the table itself; a copy of a file in another checkout (another modification time, same
bytes) is the same file; a different file of the same name is not; what the ledger took in once is never taken in
again (a reset stays a reset), and a rollback to an older snapshot does not bring old facts back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa

from ratui.engine.state import landing_facts
from ratui.engine.state.catalog import SqliteBranchCatalog
from ratui.engine.state.ledger import Ledger

KEY = "demo.bronze.events"
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def zone_files(folder: Path, **files: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return sorted(p for p in folder.iterdir() if p.is_file())


def load(ledger: Ledger, folder: Path, catalog: SqliteBranchCatalog, names: list[str], *ids: int) -> int:
    """What a run does on the installation that owns `ledger`: append rows with the files' facts in the summary."""
    identities = ledger.identities([("demo", "events", KEY, n) for n in names])
    table = catalog.load_table("main", KEY)
    table.append(pa.table({"id": list(ids)}, schema=SCHEMA),
                 snapshot_properties={**landing_facts.summary(identities), landing_facts.RUN_PROPERTY: "r-a"})
    return catalog.load_table("main", KEY).metadata.current_snapshot_id


def take_in(ledger: Ledger, catalog: SqliteBranchCatalog) -> int:
    table = catalog.load_table("main", KEY)
    walked, facts = landing_facts.since(table, ledger.synced("main", KEY))
    return len(ledger.learn("main", "demo", KEY, KEY, walked, facts))


def states(ledger: Ledger) -> dict[str, str]:
    return {e.file: e.state for e in ledger.files("demo", "events", KEY)}


def test_another_installation_takes_in_what_one_loaded(tmp_path: Path) -> None:
    catalog = SqliteBranchCatalog(tmp_path / "catalog.db", tmp_path)
    catalog.create_table("main", KEY, SCHEMA, tmp_path / "demo" / "warehouse" / "bronze" / "events")
    a_zone = tmp_path / "a" / "landing"
    a = Ledger(tmp_path / "a.db")
    a.sync("demo", "events", KEY, zone_files(a_zone, **{"1.csv": "id\n1\n", "2.csv": "id\n2\n"}))
    load(a, a_zone, catalog, ["1.csv"], 1)

    # installation b: a checkout copied later (other modification times), and one file of the same name that is
    # another file (other bytes, same size)
    b_zone = tmp_path / "b" / "landing"
    shutil.copytree(a_zone, b_zone)
    for p in b_zone.iterdir():
        os.utime(p, ns=(10**18, 10**18))
    (b_zone / "2.csv").write_text("id\n9\n")
    b = Ledger(tmp_path / "b.db")
    b.sync("demo", "events", KEY, sorted(b_zone.iterdir()))
    assert states(b) == {"1.csv": "unloaded", "2.csv": "unloaded"}
    assert take_in(b, catalog) == 1
    assert states(b) == {"1.csv": "loaded", "2.csv": "unloaded"}
    assert {e.file: e.run_id for e in b.files(state="loaded")} == {"1.csv": "r-a"}

    # a file b has not listed yet gets its row from the fact; listing the copy keeps it loaded
    a.sync("demo", "events", KEY, zone_files(a_zone, **{"3.csv": "id\n3\n"}))
    load(a, a_zone, catalog, ["3.csv"], 3)
    assert take_in(b, catalog) == 1
    shutil.copy(a_zone / "3.csv", b_zone / "3.csv")
    os.utime(b_zone / "3.csv", ns=(10**18, 10**18))
    b.sync("demo", "events", KEY, sorted(b_zone.iterdir()))
    assert states(b) == {"1.csv": "loaded", "2.csv": "unloaded", "3.csv": "loaded"}
    assert [e.file for e in b.unloaded("demo", ["events"], KEY)] == ["2.csv"]

    # taken in once: a reset in b stays a reset, and nothing new is taken in twice
    assert b.reset("demo", "events", "1.csv") == 1
    assert take_in(b, catalog) == 0
    assert states(b)["1.csv"] == "unloaded"


def test_a_rollback_does_not_bring_back_facts_taken_in(tmp_path: Path) -> None:
    catalog = SqliteBranchCatalog(tmp_path / "catalog.db", tmp_path)
    catalog.create_table("main", KEY, SCHEMA, tmp_path / "demo" / "warehouse" / "bronze" / "events")
    folder = tmp_path / "landing"
    ledger = Ledger(tmp_path / "state.db")
    ledger.sync("demo", "events", KEY, zone_files(folder, **{"1.csv": "id\n1\n"}))
    first = load(ledger, folder, catalog, ["1.csv"], 1)
    assert take_in(ledger, catalog) == 1
    ledger.sync("demo", "events", KEY, zone_files(folder, **{"2.csv": "id\n2\n"}))
    load(ledger, folder, catalog, ["2.csv"], 2)
    assert take_in(ledger, catalog) == 1
    # back to the first snapshot (what ratui's rollback does to the table), and 2.csv made loadable again
    table = catalog.load_table("main", KEY)
    table.manage_snapshots().rollback_to_snapshot(first).commit()
    ledger.reset("demo", "events", "2.csv")
    assert take_in(ledger, catalog) == 0
    assert states(ledger) == {"1.csv": "loaded", "2.csv": "unloaded"}


def test_a_zones_columns_are_the_newest_its_tables_ancestry_records(tmp_path: Path) -> None:
    """What a run with nothing new of a zone takes for the zone's columns: per zone, the newest snapshot of the
    table's current ancestry that records them; a snapshot that records none (a compaction, another engine's
    append, a run whose zones' columns did not change) is walked past, a rollback gives the older ones back."""
    catalog = SqliteBranchCatalog(tmp_path / "catalog.db", tmp_path)
    catalog.create_table("main", KEY, SCHEMA, tmp_path / "demo" / "warehouse" / "bronze" / "events")
    one = {"type": "struct", "fields": [{"name": "id", "type": "integer", "nullable": True, "metadata": {}}]}
    two = {"type": "struct", "fields": [*one["fields"], {"name": "at", "type": "date", "nullable": True,
                                                         "metadata": {}}]}

    def append(properties: dict[str, str]) -> int:
        catalog.load_table("main", KEY).append(pa.table({"id": [1]}, schema=SCHEMA), snapshot_properties=properties)
        return catalog.load_table("main", KEY).metadata.current_snapshot_id

    def recorded(*zones: str) -> dict:
        found = landing_facts.recorded_columns(catalog.load_table("main", KEY), zones)
        return {zone: (c.schema, c.run_id) for zone, c in found.items()}

    assert recorded("events") == {}  # a table with no snapshot
    first = append({**landing_facts.columns_summary({"events": one, "other": one}), landing_facts.RUN_PROPERTY: "r1"})
    append({landing_facts.RUN_PROPERTY: "r2"})  # nothing changed: nothing recorded
    append({**landing_facts.columns_summary({"events": two}), landing_facts.RUN_PROPERTY: "r3"})
    append({landing_facts.COLUMNS_PROPERTY: "not json"})  # unreadable: walked past
    assert recorded("events", "other", "never") == {"events": (two, "r3"), "other": (one, "r1")}
    assert landing_facts.columns_summary({}) == {}
    catalog.load_table("main", KEY).manage_snapshots().rollback_to_snapshot(first).commit()
    assert recorded("events") == {"events": (one, "r1")}


def test_facts_name_each_file_with_its_identity(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "state.db")
    ledger.sync("demo", "events", KEY, zone_files(tmp_path / "z", **{"a.csv": "id\n1\n"}))
    [identity] = ledger.identities([("demo", "events", KEY, "a.csv")])
    prop = landing_facts.summary([identity])
    assert set(prop) == {landing_facts.PROPERTY}
    fact = landing_facts.LandingFact(**{k: identity[k] for k in ("zone", "name", "size", "mtime_ns", "digest",
                                                                  "etag", "version")})
    assert fact.same_file(identity["size"], 1, identity["digest"], None, None)  # another time, same bytes
    assert not fact.same_file(identity["size"] + 1, identity["mtime_ns"], identity["digest"], None, None)
    assert not fact.same_file(identity["size"], identity["mtime_ns"], "0" * 64, None, None)
    assert landing_facts.summary([]) == {}


def test_a_file_another_installation_loaded_counts_one_try_here_even_after_a_rebuild_reads_it(tmp_path: Path) -> None:
    """`ratui landing`'s TRIES in a second installation: a file installation a loaded once is 1 there, whether b
    had listed it before taking it in or not, and stays 1 when b's full refresh reads it again (a rebuild of a
    loaded file is no new try); the facts taken in name the run that loaded each file."""
    catalog = SqliteBranchCatalog(tmp_path / "catalog.db", tmp_path)
    catalog.create_table("main", KEY, SCHEMA, tmp_path / "demo" / "warehouse" / "bronze" / "events")
    a_zone = tmp_path / "a" / "landing"
    a = Ledger(tmp_path / "a.db")
    a.sync("demo", "events", KEY, zone_files(a_zone, **{"1.csv": "id\n1\n", "2.csv": "id\n2\n"}))
    load(a, a_zone, catalog, ["1.csv", "2.csv"], 1, 2)

    b_zone = tmp_path / "b" / "landing"
    shutil.copytree(a_zone, b_zone)
    b = Ledger(tmp_path / "b.db")
    b.sync("demo", "events", KEY, [b_zone / "1.csv"])  # b has listed 1.csv, not 2.csv yet
    table = catalog.load_table("main", KEY)
    learned = b.learn("main", "demo", KEY, KEY, *landing_facts.since(table, b.synced("main", KEY)))
    assert sorted((f.name, f.run_id) for f in learned) == [("1.csv", "r-a"), ("2.csv", "r-a")]
    b.sync("demo", "events", KEY, sorted(b_zone.iterdir()))
    tries = {e.file: e.attempts for e in b.files("demo", "events", KEY)}
    assert tries == {"1.csv": 1, "2.csv": 1}

    with b._conn() as conn:  # b's full refresh reads both again, and merges
        b.mark_loaded(conn, "r-b", [("demo", "events", KEY, "1.csv"), ("demo", "events", KEY, "2.csv")])
    assert {e.file: (e.state, e.attempts, e.run_id) for e in b.files("demo", "events", KEY)} == {
        "1.csv": ("loaded", 1, "r-b"), "2.csv": ("loaded", 1, "r-b")}


def test_what_a_run_is_told_of_files_another_installation_loaded_says_who_when_and_whether_it_reads_them():
    """The note on the run's line and in its --json (run/sources.py learned_note): how many, which zone, which run
    loaded them and when; `not read again`, or, for a full refresh (which rebuilds from every file the ledger
    knows), why it reads them all the same."""
    from ratui.engine.run.sources import learned_note

    facts = [landing_facts.LandingFact("orders", f"{i}.csv", 10, 1, run_id="r-a", at="2026-03-01T09:00:00.5+00:00")
             for i in range(3)]
    appended = learned_note(facts, "main", rebuild=False)
    assert appended.startswith("3 landing file(s) already loaded on main (3 of zone orders by run r-a at "
                               "2026-03-01 09:00:00 UTC)") and appended.endswith("; not read again"), appended
    rebuilt = learned_note(facts, "main", rebuild=True)
    assert "not read again" not in rebuilt and "a full_refresh rebuilds the table from every file" in rebuilt
