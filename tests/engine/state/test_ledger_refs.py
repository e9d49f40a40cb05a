"""The landing ledger per ref (no Spark): a branch's own loads, archived files, hand-on by merge, rollback."""

from __future__ import annotations

import os
from contextlib import closing

from ratui.engine.state.db import open_db, write_tx
from ratui.engine.landing.local import LocalZone
from ratui.engine.state.ledger import Ledger

P = "demo.bronze.events"


def tx(ledger: Ledger):
    conn = open_db(ledger.db_path)
    return closing(conn), conn


def test_a_branch_sees_its_own_loads_and_archived_files_keep_theirs(tmp_path):
    zone = tmp_path / "zone"
    zone.mkdir()
    for name, text in (("a.csv", "id\n1\n"), ("b.csv", "id\n2\n"), ("c.csv", "id\n3\n")):
        (zone / name).write_text(text)
    ledger = Ledger(tmp_path / "state.db")
    ledger.sync("demo", "events", P, sorted(zone.iterdir()))
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        ledger.mark_loaded(conn, "r1", [("demo", "events", P, "a.csv")], at="2026-01-01T00:00:01.000000+00:00")
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        ledger.fork(conn, "main", "dev")  # dev starts with a.csv loaded
    # main archives a.csv (moved, same size and time): dev still counts it as loaded, under its archived name
    moved = LocalZone("demo", "events", zone).archive(["a.csv"], "r1")
    ledger.mark_archived("demo", "events", "r1", moved, [P], "zone/_processed/r1")
    rows = ledger.files("demo", "events", P)
    assert {(e.file, e.state) for e in ledger.on_ref("dev", rows)} == {
        ("_processed/r1/a.csv", "loaded"), ("b.csv", "unloaded"), ("c.csv", "unloaded")}
    # a branch created after the archiving inherits the load too, under the file's own name
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        ledger.fork(conn, "main", "later")
    assert [e.name for e in ledger.unloaded("demo", ["events"], P, "later")] == ["b.csv", "c.csv"]

    # dev loads b.csv: main does not see it as loaded
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        ledger.mark_loaded(conn, "r2", [("demo", "events", P, "b.csv")], ref="dev",
                           at="2026-01-01T00:00:02.000000+00:00")
    assert [e.name for e in ledger.unloaded("demo", ["events"], P, "dev")] == ["c.csv"]
    assert [e.name for e in ledger.unloaded("demo", ["events"], P)] == ["b.csv", "c.csv"]

    # a rewritten file is a new file on every ref
    os.utime(zone / "c.csv", ns=(1, 1))
    (zone / "b.csv").write_text("id\n2\n22\n")
    ledger.sync("demo", "events", P, [zone / "b.csv", zone / "c.csv"])
    assert [e.name for e in ledger.unloaded("demo", ["events"], P, "dev")] == ["b.csv", "c.csv"]
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        ledger.mark_loaded(conn, "r3", [("demo", "events", P, "b.csv")], ref="dev",
                           at="2026-01-01T00:00:03.000000+00:00")
        # dev merges into main: its loads go with the pipeline's table
        assert ledger.hand_on(conn, "dev", "main", [P], "2026-01-01T00:00:04.000000+00:00") == 1
    assert [e.name for e in ledger.unloaded("demo", ["events"], P)] == ["c.csv"]
    loaded = {e.name: (e.run_id, e.loaded_at) for e in ledger.files("demo", "events", P) if e.state == "loaded"}
    assert loaded["b.csv"] == ("r3", "2026-01-01T00:00:04.000000+00:00")

    # a rollback on main to a commit of 00:00:02 makes what was loaded after it loadable again; on dev likewise
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        assert ledger.unload_after(conn, "main", [P], "2026-01-01T00:00:02.000000+00:00") == 1
        assert ledger.unload_after(conn, "dev", [P], "2026-01-01T00:00:02.500000+00:00") == 1
    assert [e.name for e in ledger.unloaded("demo", ["events"], P)] == ["b.csv", "c.csv"]
    assert [e.name for e in ledger.unloaded("demo", ["events"], P, "dev")] == ["b.csv", "c.csv"]
    closer, conn = tx(ledger)
    with closer, write_tx(conn):
        ledger.drop_ref(conn, "dev")  # the branch deleted: its view goes, main's stays
    assert [e.name for e in ledger.unloaded("demo", ["events"], P, "dev")] == ["a.csv", "b.csv", "c.csv"]
    assert [e.name for e in ledger.unloaded("demo", ["events"], P)] == ["b.csv", "c.csv"]
    assert [e.name for e in ledger.on_ref("dev", ledger.files("demo", "events", P)) if e.state == "loaded"] == []
