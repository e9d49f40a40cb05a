"""The console's Branches and History screens on a real Nessie server (issue 30): the sample project with
`catalog: {type: nessie}` in its ratui.yaml, driven with the pilot as test_branch_workflow.py drives it on the embedded
catalog, and checked against Nessie's own REST API rather than ratui's reading of it.

- Branches: main, a branch made in the console (`n`) and one another Nessie client made are listed; the diff of a
  branch that changed a table names it; `m` shows the dry run, then lands the change on main as Nessie sees it; `d`
  removes the branch from Nessie's ref list.
- History: the sample run through the engine on Spark (nessie_sample, tests/conftest.py, on a Nessie of its own); `l`
  on main shows Nessie's log with ratui's runs (their ids from the commit properties); a rollback from there puts
  main's table back where Nessie had it before.

One Nessie per module (tests/nessie_server.py), emptied between tests.
"""

from __future__ import annotations

import pytest
import requests

from ratui.screens.branches_dialogs import MergeDryRunScreen, NewBranchScreen
from ratui.screens.dialogs import ConfirmScreen
from ratui.screens.history import HistoryScreen

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .test_branch_workflow import CUSTOMERS, ORDERS, REVENUE, RUN_1, RUN_2, RUN_3, goto, record_run, write


SIZE = (130, 42)
NESSIE_PROPERTY = "ratui.run_id"  # ratui's facts about a commit, as Nessie's commit properties name them


@pytest.fixture(scope="module")
def nessie(nessie_uri):
    return nessie_uri


def on_nessie(tmp_path, base: str):
    """A copy of the sample project whose catalog is the Nessie server at `base` (emptied first)."""
    from tests.nessie_server import reset

    reset(base)
    root = copy_sample(tmp_path)
    with open(root / "ratui.yaml", "a") as f:
        f.write(f"catalog:\n  type: nessie\n  uri: {base}\n")
    return root


# ------------------------------------------------------------------------------------ Nessie's own answers


def nessie_refs(base: str) -> dict[str, str]:
    return {r["name"]: r["hash"] for r in requests.get(f"{base}/trees", timeout=10).json()["references"]}


def nessie_location(base: str, ref: str, key: str) -> str | None:
    """The table's metadata location on `ref` as Nessie serves it (None: no such key)."""
    response = requests.get(f"{base}/trees/{ref}/contents/{key}", timeout=10)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()["content"]["metadataLocation"]


def nessie_tables(base: str, ref: str) -> set[str]:
    entries = requests.get(f"{base}/trees/{ref}/entries", timeout=10).json()["entries"]
    return {".".join(e["name"]["elements"]) for e in entries if e["type"] == "ICEBERG_TABLE"}


def nessie_runs(base: str, ref: str) -> list[str]:
    """The run ids Nessie's log of `ref` carries in its commit properties, newest first."""
    log = requests.get(f"{base}/trees/{ref}/history", params={"max-records": 500}, timeout=10).json()["logEntries"]
    out = []
    for entry in log:
        meta = entry["commitMeta"]  # API v2: every property as a list of values (`allProperties`)
        properties = {k: v[0] for k, v in (meta.get("allProperties") or {}).items() if v}
        run_id = {**properties, **(meta.get("properties") or {})}.get(NESSIE_PROPERTY)
        if run_id and run_id not in out:
            out.append(run_id)
    return out


def branch_elsewhere(base: str, name: str, from_ref: str = "main") -> None:
    """A branch made by another Nessie client (not ratui): Nessie's REST API v2, as `nessie branch` would."""
    head = requests.get(f"{base}/trees/{from_ref}", timeout=10).json()["reference"]
    requests.post(f"{base}/trees", params={"name": name, "type": "BRANCH"},
                  json={"type": "BRANCH", "name": from_ref, "hash": head["hash"]}, timeout=10).raise_for_status()


def listed_refs(app) -> list[str]:
    table = app.screen.query_one("#branches-table")
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


# ------------------------------------------------------------------------------------------------ Branches


@pytest.fixture
def written(nessie, tmp_path):
    """main on Nessie: clean_orders written by two runs (5 rows, then 8), raw_customers by a third (4 rows), as in
    test_branch_workflow.py (PyIceberg on the real catalog, commits recorded with a run's meta)."""
    from ratui.engine.facade.engine import Engine

    root = on_nessie(tmp_path, nessie)
    engine = Engine.open(root)
    assert type(engine.state.catalog).__name__ == "NessieBranchCatalog"
    for run_id, key in ((RUN_1, ORDERS), (RUN_2, ORDERS), (RUN_3, CUSTOMERS)):
        record_run(engine, run_id, key)
    first = write(engine, root, "main", ORDERS, 5, run_id=RUN_1, version="v1a2b3c4d5")
    write(engine, root, "main", ORDERS, 3, run_id=RUN_2, version="v2e6f7a8b9", start=5)
    write(engine, root, "main", CUSTOMERS, 4, run_id=RUN_3, version="c1")
    engine.close()
    return root, first


def drop_elsewhere(base: str, key: str, message: str) -> str:
    """Another Nessie client drops table `key` from main (a DELETE operation): returns its commit's hash."""
    head = requests.get(f"{base}/trees/main", timeout=10).json()["reference"]["hash"]
    operation = {"type": "DELETE", "key": {"elements": key.split(".")}}
    response = requests.post(f"{base}/trees/main@{head}/history/commit", timeout=10,
                             json={"commitMeta": {"message": message}, "operations": [operation]})
    response.raise_for_status()
    return response.json()["targetBranch"]["hash"]


def test_branches_on_nessie_list_diff_merge_delete(written, nessie, monkeypatch):
    from ratui.screens import branches

    # what other Nessie clients do reaches the screens through the console's follower, not Branches' age tick
    monkeypatch.setattr(branches, "AGE_TICK", 3600.0)
    root, _ = written
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await wait_for(pilot, lambda: "main" in listed_refs(app), 30)
            assert listed_refs(app) == ["main"]
            assert "Tables on main (2)" in screen_text(app)

            # n: a branch made in the console is a Nessie branch
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, NewBranchScreen), 10)
            await pilot.press(*"dev", "enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, NewBranchScreen), 30)
            await wait_for(pilot, lambda: "dev" in listed_refs(app), 30)
            assert "dev" in nessie_refs(nessie)

            # a branch another Nessie client made shows up without being asked
            branch_elsewhere(nessie, "theirs")
            await wait_for(pilot, lambda: "theirs" in listed_refs(app), 30)
            assert listed_refs(app)[0] == "main" and set(listed_refs(app)) == {"main", "dev", "theirs"}
            text = screen_text(app)
            assert "3 ref(s)" in text and "main + 2 of yours" in text
            goto(app, "theirs")
            await wait_for(pilot, lambda: "Diff of theirs against main: 0 table(s) differ" in screen_text(app), 30)

            # a change on dev (a table added, another appended to): the diff names both, changed on dev
            engine = app.controller.engine
            write(engine, root, "dev", REVENUE, 3)
            write(engine, root, "dev", ORDERS, 2, start=100)
            goto(app, "main")
            await settle(pilot)
            goto(app, "dev")
            await wait_for(pilot, lambda: "Diff of dev against main: 2 table(s)" in screen_text(app), 30)
            await settle(pilot)
            diff = app.screen.query_one("#diff-table")
            rows = {key.value: [str(c) for c in diff.get_row(key)] for key in diff.rows}
            assert set(rows) == {ORDERS, REVENUE}
            assert rows[REVENUE][1:4] == ["added", "dev", "3 / -"]
            assert rows[ORDERS][1:4] == ["modified", "dev", "10 / 8"]
            assert "(2 changed on dev)" in screen_text(app)

            # m: the dry run first, nothing on Nessie changes until y
            main_head = nessie_refs(nessie)["main"]
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeDryRunScreen), 30)
            text = flat(screen_text(app))
            assert "Merge dev into main?" in text
            assert "gold.daily_revenue added 3 -" in text and "silver.clean_orders modified 10 8" in text
            assert "2 table(s) would be applied to main in one commit" in text
            assert nessie_refs(nessie)["main"] == main_head
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Merged dev into main" in n for n in app.notices), 30)
            # Nessie's own API: main has dev's tables as dev has them
            assert nessie_refs(nessie)["main"] != main_head
            assert REVENUE in nessie_tables(nessie, "main")
            for key in (ORDERS, REVENUE):
                assert nessie_location(nessie, "main", key) == nessie_location(nessie, "dev", key) is not None
            assert engine.load_table("main", ORDERS).scan().to_arrow().num_rows == 10

            # d: the branch leaves Nessie's ref list
            await settle(pilot)
            goto(app, "dev")
            await settle(pilot)
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30)
            text = flat(screen_text(app))
            assert "Delete branch dev?" in text and "no longer reachable by its name" in text
            await pilot.press("y")
            await wait_for(pilot, lambda: "dev" not in listed_refs(app), 30)
            assert set(nessie_refs(nessie)) == {"main", "theirs"}
            assert any("Deleted branch dev" in n for n in app.notices)

            # main's history is Nessie's log: the merge is its newest commit; another client's drop shows up
            goto(app, "main")
            await settle(pilot)
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 30)
            table = app.screen.query_one("#history-table")
            assert str(table.get_row_at(0)[1]) == "merge"
            assert [str(table.get_row_at(i)[3]) for i in range(table.row_count)].count(RUN_2) == 1
            theirs = drop_elsewhere(nessie, REVENUE, "drop daily_revenue (another client)")
            await wait_for(pilot, lambda: theirs in app.screen.entries, 30)
            entry = app.screen.entries[theirs]
            assert entry.message == "drop daily_revenue (another client)"
            assert [(t["table"], t["change"]) for t in entry.tables] == [(REVENUE, "dropped")]
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------------------- History


def test_history_on_nessie_shows_its_log_and_rolls_back(nessie_sample):
    """The sample run on Nessie through the engine (nessie_sample, tests/conftest.py: on a Nessie of its own), and
    clean_orders again (a full refresh): main's history is Nessie's log with the runs in its commit properties; a
    rollback of clean_orders to the first run's commit puts Nessie's pointer for it back."""
    from ratui.engine.facade.engine import Engine

    nessie, root, results = nessie_sample["uri"], nessie_sample["root"], nessie_sample["results"]
    assert all(r.status == "success" for r in results), [(r.pipeline, r.error) for r in results if r.error]
    engine = Engine.open(root)
    first_pointer = nessie_location(nessie, "main", ORDERS)
    again = engine.run(engine.compile().select([ORDERS]), full_refresh=True, force=True)
    assert [r.status for r in again] == ["success"], [r.error for r in again]
    engine.close()
    run_ids = [r.run_id for r in results] + [again[0].run_id]
    assert set(run_ids) <= set(nessie_runs(nessie, "main"))
    moved = nessie_location(nessie, "main", ORDERS)
    assert moved != first_pointer
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await wait_for(pilot, lambda: "main" in listed_refs(app), 30)
            assert listed_refs(app) == ["main"]  # no run branch left on Nessie
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 60)
            await settle(pilot)
            table = app.screen.query_one("#history-table")
            shown = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
            kinds = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
            # every run is there, newest first, as Nessie's commit properties name them
            listed = [r for r in shown if r in run_ids]
            assert set(listed) == set(run_ids)
            assert listed[0] == again[0].run_id
            assert "run" in kinds and kinds[-1] == "init"
            assert "History of main" in screen_text(app)

            # rollback of clean_orders from its own history: back to the first run's pointer on Nessie
            await pilot.press("escape")
            await settle(pilot)
            app.show_pipeline(ORDERS)
            await settle(pilot)
            await pilot.press("h")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 60)
            await settle(pilot)
            table = app.screen.query_one("#history-table")
            runs = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
            first_run = next(r.run_id for r in results if r.pipeline == ORDERS)
            assert runs[:2] == [again[0].run_id, first_run]
            before = engine_pointers(app)
            await pilot.press("down", "r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30)
            assert f"Roll {ORDERS} back to commit" in flat(screen_text(app))
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Rolled " in n for n in app.notices), 30)
            await settle(pilot)
            after = engine_pointers(app)
            assert nessie_location(nessie, "main", ORDERS) == first_pointer == after[ORDERS] != before[ORDERS]
            assert {k: v for k, v in after.items() if k != ORDERS} == \
                {k: v for k, v in before.items() if k != ORDERS}  # every other table untouched
            table = app.screen.query_one("#history-table")
            assert str(table.get_row_at(0)[1]) == "rollback"
            assert not app.crashes

    run(go())


def engine_pointers(app) -> dict[str, str]:
    return dict(app.controller.engine.table_pointers("main"))
