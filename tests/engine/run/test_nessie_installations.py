"""Two installations of one project sharing one real Nessie server (issue 30): two checkouts, each with its own
`.ratui/` (run history, landing ledger), one catalog, one shared warehouse folder (`catalog.warehouse`).

The landing files are in both checkouts (copied: other modification times, same bytes). Between them, each file is
loaded exactly once: what one installation loaded travels in the snapshot it wrote (state/landing_facts.py), and the
other takes it in before it chooses files. Two runs of the same pipeline at once, one per installation, both past
their write before either merges: Nessie refuses the second merge, that run retries against the new head, and main
ends as the result of the two runs one after the other.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import requests

from ratui.engine.project.settings import load_settings
from ratui.engine.facade.engine import Engine
from ratui.engine.state.project_state import ProjectState
from tests.conftest import TEST_SETTINGS

PIPELINE = """\
-- @merge_strategy: append_only
-- @landing_mode: new_files
SELECT CAST(id AS BIGINT) AS id, regexp_extract(input_file_name(), '[^/]+$', 0) AS source_file
FROM {{ landing_zone('orders') }}
"""
KEY = "shop.bronze.orders"


def csv(*ids: int) -> str:
    return "id\n" + "".join(f"{i}\n" for i in ids)


def checkout(root: Path, uri: str, lake: Path) -> Path:
    (root / "shop" / "pipelines" / "bronze" / "orders").mkdir(parents=True)
    (root / "shop" / "pipelines" / "bronze" / "orders" / "pipeline.sql").write_text(PIPELINE)
    (root / "shop" / "landing" / "orders").mkdir(parents=True)
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="shop") +
                                     f"catalog:\n  type: nessie\n  uri: {uri}\n  warehouse: {lake}\n")
    return root


def land(roots: list[Path], name: str, text: str) -> None:
    """The same file in every checkout, each copy with a modification time of its own."""
    for i, root in enumerate(roots):
        path = root / "shop" / "landing" / "orders" / name
        path.write_text(text)
        os.utime(path, ns=(10**18 + i * 10**12, 10**18 + i * 10**12))


class MeetBeforeMerging:
    """Both installations' first merge waits here until the other has written too (a barrier around the real
    Nessie catalog's merge; the merge itself is Nessie's)."""

    def __init__(self, engines: list[Engine]):
        self.barrier = threading.Barrier(len(engines), timeout=300)
        for engine in engines:
            catalog = engine.state.catalog
            original = catalog.merge
            waited = threading.Event()

            def merge(*args, _original=original, _waited=waited, **kwargs):
                if not _waited.is_set():
                    _waited.set()
                    self.barrier.wait()
                return _original(*args, **kwargs)

            catalog.merge = merge  # type: ignore[method-assign]


def ids(engine: Engine) -> list[int]:
    _, rows, _ = engine.query("SELECT id FROM bronze.orders ORDER BY id")
    return [r[0] for r in rows]


def test_two_installations_load_each_file_once_and_concurrent_runs_give_the_serial_result(
        tmp_path: Path, spark, tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.nessie_server import nessie_server

    lake = tmp_path / "lake"
    lake.mkdir()
    with nessie_server(tmp_path_factory.mktemp("nessie")) as uri:
        roots = [checkout(tmp_path / "a", uri, lake), checkout(tmp_path / "b", uri, lake)]
        a, b = (Engine(ProjectState(load_settings(root))) for root in roots)

        land(roots, "1.csv", csv(1, 2))
        land(roots, "2.csv", csv(3))
        (ra,) = a.run(a.compile().select([KEY]))
        assert ra.status == "success" and ra.rows_written == 3, ra.error
        # b's ledger has never seen these files: it learns from the table that they are loaded, and reads nothing
        (rb,) = b.run(b.compile().select([KEY]))
        assert rb.status == "success" and rb.rows_written == 0, rb.error
        assert {e.file: (e.state, e.run_id, e.attempts) for e in b.state.ledger.files("shop", "orders", KEY)} == {
            "1.csv": ("loaded", ra.run_id, 1), "2.csv": ("loaded", ra.run_id, 1)}  # TRIES 1: loaded once, by a
        # and b is told so on its run's line and in --json (a note), with the run that loaded them
        told = [n for n in rb.notes if "already loaded on main" in n]
        assert len(told) == 1 and f"2 of zone orders by run {ra.run_id}" in told[0] and "not read again" in told[0], \
            rb.notes
        # its empty batch has the zone's columns as a's run recorded them in the table: no file is read for them
        log = "\n".join(line["message"] for line in b.state.history.get_run(rb.run_id)["logs"])
        assert f"landing zone orders: no file is new: its columns are those Spark read by run {ra.run_id} at " in log, \
            log

        # the other way round: b loads a new file first, a does not load it again
        land(roots, "3.csv", csv(4))
        (rb,) = b.run(b.compile().select([KEY]))
        (ra,) = a.run(a.compile().select([KEY]))
        assert (rb.rows_written, ra.rows_written) == (1, 0), (rb.error, ra.error)
        assert ids(a) == ids(b) == [1, 2, 3, 4]

        # both at once, both past their write before either merges: one merges, the other's merge is refused by
        # Nessie, and its retry (a new branch from the new head) finds the files loaded
        land(roots, "4.csv", csv(5, 6))
        land(roots, "5.csv", csv(7))
        MeetBeforeMerging([a, b])
        results: dict[str, object] = {}

        def go(name: str, engine: Engine) -> None:
            (results[name],) = engine.run(engine.compile().select([KEY]))

        threads = [threading.Thread(target=go, args=(n, e)) for n, e in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        both = [results["a"], results["b"]]
        assert all(r.status == "success" for r in both), [r.error for r in both]
        assert sorted(r.rows_written for r in both) == [0, 3]
        loser = next(r for r in both if r.rows_written == 0)
        engine = a if loser is results["a"] else b
        log = "\n".join(line["message"] for line in engine.state.history.get_run(loser.run_id)["logs"])
        assert "merge conflict" in log
        assert ids(a) == ids(b) == [1, 2, 3, 4, 5, 6, 7]

        # the shared warehouse swept from one installation: its namespace's unreachable old files go, every file of
        # the table stays, and another project's namespace in the same folder is never touched
        junk = lake / "shop/warehouse/bronze/orders/data/00000-0-junk.parquet"
        foreign = lake / "other/warehouse/silver/t/data/old.parquet"
        for path in (junk, foreign):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * 10)
        for folder, _, files in os.walk(lake):
            for name in files:
                os.utime(Path(folder) / name, (1, 1))
        report = b.reaper().run()
        assert report.ok, report.errors
        removed = [item["path"] for item in report.tasks["orphan_files"].removed]
        # the junk, and what the retried run's first attempt wrote before Nessie refused its merge
        assert str(junk) in removed and all(p.startswith(str(lake / "shop")) for p in removed)
        assert foreign.exists() and not junk.exists()
        assert ids(a) == ids(b) == [1, 2, 3, 4, 5, 6, 7]

        # Nessie's own view: main holds the table, no run branch is left, and the loads are named in the table
        refs = requests.get(f"{uri}/trees", timeout=10).json()["references"]
        assert [r["name"] for r in refs] == ["main"]
        table = a.state.catalog.load_table("main", KEY)
        named = sorted(f["name"] for s in table.metadata.snapshots
                       for f in json.loads((s.summary or {}).get("ratui.landing", "[]")))
        assert named == ["1.csv", "2.csv", "3.csv", "4.csv", "5.csv"]
        for engine in (a, b):
            engine.close()


def test_a_process_killed_between_nessies_merge_and_its_own_record_loses_nothing(
        tmp_path: Path, spark, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nessie's merge commits before the project's database hears of it. A `ratui run` SIGKILLed in between: the
    data is on main; recovery finds the run's merge in Nessie's log and records it as a success, and the next run
    takes the landed files in from the table instead of loading them again."""
    import subprocess
    import sys

    from tests.nessie_server import nessie_server

    lake = tmp_path / "lake"
    lake.mkdir()
    with nessie_server(tmp_path_factory.mktemp("nessie")) as uri:
        root = checkout(tmp_path / "a", uri, lake)
        land([root], "1.csv", csv(1, 2))
        env = dict(os.environ, RATUI_FAILPOINT="kill:merged")
        proc = subprocess.run([sys.executable, "-m", "ratui", "run", "bronze.orders", "--project", str(root)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == -9, proc.stdout + proc.stderr

        engine = Engine(ProjectState(load_settings(root)))
        (dead,) = [r for r in engine.state.history.list_runs(5) if r["status"] == "running"]
        assert engine.state.ledger.files("shop", "orders", KEY)[0].state == "unloaded"  # the ledger never heard
        assert engine.recover() == [dead["id"]]
        assert engine.state.history.get_run(dead["id"])["status"] == "success"
        assert ids(engine) == [1, 2]

        (again,) = engine.run(engine.compile().select([KEY]))
        assert again.status == "success" and again.rows_written == 0, again.error
        assert ids(engine) == [1, 2]
        [row] = engine.state.ledger.files("shop", "orders", KEY)
        assert (row.state, row.run_id) == ("loaded", dead["id"])
        refs = requests.get(f"{uri}/trees", timeout=10).json()["references"]
        assert [r["name"] for r in refs] == ["main"]
        engine.close()
