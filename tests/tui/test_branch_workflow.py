"""The branch workflow in the console: create a branch and switch the console to it (Pipelines says so and runs go
there), merge with a dry run per table (a conflict changes nothing), the diff against main, History of a ref and of
one table, rollback (its confirmation lists the change; refused while a run is in flight), atomic publish, and a
query on a past state.

Real project state without Spark (tables written with PyIceberg on the real catalog, commits recorded with the meta a
run leaves), except one atomic publish that really runs. Snapshots use a stub controller for the catalog reads, since
real hashes, snapshot ids and times are random.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from ratui.console.controller import BranchRow, Controller, DiffRow, TableState, utc_now
from ratui.engine.errors import RatuiError
from ratui.engine.ops.branches import LogEntry
from ratui.screens.branches_dialogs import MergeDryRunScreen, NewBranchScreen
from ratui.screens.dialogs import ConfirmScreen
from ratui.screens.history import HistoryScreen
from ratui.screens.run import RunScreen
from ratui.engine.run.record import RunRecord

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for

SIZE = (130, 42)
SMALL = (80, 24)
NS = "ecommerce"
ORDERS = f"{NS}.silver.clean_orders"  # the tables as keys; the diff names them layer.name
CUSTOMERS = f"{NS}.bronze.raw_customers"
REVENUE = f"{NS}.gold.daily_revenue"
RUN_1, RUN_2, RUN_3 = "260301100000aaaa01", "260301110000aaaa02", "260301113000aaaa03"


def write(engine, root, ref: str, key: str, rows: int, *, run_id: str | None = None, version: str | None = None,
          start: int = 0):
    """Append `rows` rows to the table on `ref` (creating it) and record the commit as a run of `key` would."""
    catalog = engine.state.catalog
    try:
        table = catalog.load_table(ref, key)
    except RatuiError:
        location = root / NS / "warehouse" / key.split(".")[1] / f"{key.rsplit('.', 1)[1]}-{ref}"
        table = catalog.create_table(ref, key, pa.schema([("id", pa.int64())]), location)
    table.append(pa.table({"id": list(range(start, start + rows))}))
    meta = {"kind": "run", "run_id": run_id, "pipeline": key, "version": version} if run_id else None
    return catalog.record_commit(ref, f"run {run_id} of {key}" if run_id else f"write {key}", meta)


def record_run(engine, run_id: str, key: str) -> None:
    history = engine.state.history
    RunRecord(history).create(run_id, key, "cli", "full_refresh", None)
    RunRecord(history).update(run_id, status="success", started_at="2026-03-01T10:00:00.000Z",
                              finished_at="2026-03-01T10:00:04.000Z", duration_ms=4000, rows_written=5,
                              branch=f"run-{run_id}", merged_at="2026-03-01T10:00:04.000Z")


@pytest.fixture
def project(tmp_path):
    """main: clean_orders written by two runs (5 rows, then 8), raw_customers by a third (4 rows)."""
    from ratui.engine.facade.engine import Engine

    root = copy_sample(tmp_path)
    engine = Engine.open(root)
    for run_id, key in ((RUN_1, ORDERS), (RUN_2, ORDERS), (RUN_3, CUSTOMERS)):
        record_run(engine, run_id, key)
    first = write(engine, root, "main", ORDERS, 5, run_id=RUN_1, version="v1a2b3c4d5")
    write(engine, root, "main", ORDERS, 3, run_id=RUN_2, version="v2e6f7a8b9", start=5)
    write(engine, root, "main", CUSTOMERS, 4, run_id=RUN_3, version="c1")
    engine.close()
    return root, first


def goto(app, ref: str) -> None:
    table = app.screen.query_one("#branches-table")
    names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
    table.move_cursor(row=names.index(ref))


def engine_of(app):
    return app.controller.engine


# ------------------------------------------------------------------------------------ create, switch, runs


def test_create_a_branch_switch_to_it_and_pipelines_says_so(project):
    root, _ = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            assert "on main" in screen_text(app).splitlines()[1]  # Pipelines names its ref at 80x24
            await pilot.press("4")
            await settle(pilot)

            # a reserved name: the dialog says why (code and hint) and stays open
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, NewBranchScreen), 10)
            assert app.screen.query_one("#new-branch-from").value == "main"  # from the selected ref
            await pilot.press(*"run-mine", "enter")
            await wait_for(pilot, lambda: "RAT-CAT-012" in screen_text(app), 10)
            assert isinstance(app.screen, NewBranchScreen)
            assert "hint:" in screen_text(app)
            name = app.screen.query_one("#new-branch-name")
            name.value = ""
            await pilot.press(*"dev", "enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, NewBranchScreen), 10)
            await settle(pilot)
            assert "dev" in [r.name for r in engine_of(app).refs()]
            assert any("Created branch dev from main" in n for n in app.notices)
            assert app.screen.cursor_key() == "dev"  # the new branch is selected

            # a branch of another name that exists already: RAT-CAT-001, nothing made
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, NewBranchScreen), 10)
            assert app.screen.query_one("#new-branch-from").value == "dev"
            await pilot.press(*"dev", "enter")
            await wait_for(pilot, lambda: "RAT-CAT-001" in screen_text(app), 10)
            await pilot.press("escape")
            await settle(pilot)

            # switch: the console works on dev; the list marks it; Pipelines says so
            assert app.controller.ref == "main"
            await pilot.press("s")
            await settle(pilot)
            assert app.controller.ref == "dev"
            assert "working on dev" in screen_text(app)
            await pilot.press("1")
            await settle(pilot)
            line = screen_text(app).splitlines()[1]
            assert "on dev" in line and "main untouched" in line

            # back to main with enter on it
            await pilot.press("4")
            await settle(pilot)
            goto(app, "main")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert app.controller.ref == "main"
            assert not app.crashes

    run(go())


def test_runs_go_to_the_working_ref(project, monkeypatch):
    """start and start_batch hand the engine the working ref (atomic for a publish); a working ref deleted
    elsewhere is refused before anything is queued."""
    root, _ = project
    controller = Controller(root)
    controller.boot(lambda: None)
    engine = controller.engine
    engine.create_branch("dev")
    seen = []

    class Started:
        run_ids = ["x"]

    def fake_start(keys, **kwargs):
        seen.append((keys, kwargs["ref"], kwargs.get("atomic", False)))
        return Started()

    monkeypatch.setattr(engine, "start", fake_start)
    controller.switch_ref("dev")
    controller.start(ORDERS)
    batch = controller.start_batch([CUSTOMERS, ORDERS], atomic=True)
    assert seen == [([ORDERS], "dev", False), ([CUSTOMERS, ORDERS], "dev", True)]
    assert (batch.ref, batch.atomic) == ("dev", True)
    with pytest.raises(RatuiError) as refused:
        controller.switch_ref(f"run-{RUN_1}")
    assert refused.value.code == "RAT-CAT-012" and controller.ref == "dev"
    with pytest.raises(RatuiError) as refused:
        controller.switch_ref("nowhere")
    assert refused.value.code == "RAT-CAT-002" and controller.ref == "dev"
    monkeypatch.undo()

    engine.state.catalog.delete_branch("dev")  # as another process would
    before, batches = engine.count_runs(), set(controller.batches)
    with pytest.raises(RatuiError) as gone:
        controller.start(ORDERS)
    assert gone.value.code == "RAT-CAT-002"
    with pytest.raises(RatuiError):
        controller.start_batch([ORDERS], atomic=True)
    assert engine.count_runs() == before and set(controller.batches) == batches
    assert [r.name for r in engine.refs()] == ["main"]  # no publish branch was left behind
    controller.close()


def test_publish_on_a_working_ref_that_is_gone_says_not_published(project):
    root, _ = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: app.controller.engine is not None, 10)
            engine_of(app).create_branch("dev")
            app.controller.switch_ref("dev")
            engine_of(app).state.catalog.delete_branch("dev")  # another process deleted it meanwhile
            await pilot.press("P")
            await wait_for(pilot, lambda: any("NOT published" in n for n in app.notices), 10)
            note = next(n for n in app.notices if "NOT published" in n)
            assert "RAT-CAT-002" in note and "hint:" in note
            assert not isinstance(app.screen, RunScreen)
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------------ diff, merge


def test_diff_and_merge_with_a_dry_run_per_table(project):
    from pyiceberg.types import StringType

    from ratui.engine.facade.engine import Engine

    root, _ = project
    engine = Engine.open(root)
    engine.create_branch("dev")
    write(engine, root, "dev", REVENUE, 3)  # added on dev
    table = engine.state.catalog.load_table("dev", ORDERS)
    with table.update_schema() as update:
        update.add_column("note", StringType())
    engine.state.catalog.record_commit("dev", "add note to clean_orders")  # modified on dev: a new column
    write(engine, root, "main", CUSTOMERS, 2, start=4)  # main moved after dev forked
    engine.create_branch("hot")
    engine.create_branch("twin")
    write(engine, root, "twin", CUSTOMERS, 2, start=30)  # twin only appends to raw_customers, as main does below
    write(engine, root, "hot", CUSTOMERS, 3, start=10)
    hot = engine.state.catalog.load_table("hot", CUSTOMERS)
    with hot.update_schema() as update:  # not only an append on hot: no merge by append
        update.add_column("tier", StringType())
    engine.state.catalog.record_commit("hot", "add tier to raw_customers")
    write(engine, root, "main", CUSTOMERS, 1, start=20)  # ... and both changed raw_customers: a conflict
    engine.create_branch("feat", from_ref="dev")
    write(engine, root, "feat", f"{NS}.gold.product_funnel", 7)
    engine.close()
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            goto(app, "dev")
            await wait_for(pilot, lambda: "Diff of dev against main" in screen_text(app), 10)
            await settle(pilot)
            diff = app.screen.query_one("#diff-table")
            rows = {key.value: [str(c) for c in diff.get_row(key)] for key in diff.rows}
            assert set(rows) == {ORDERS, REVENUE, CUSTOMERS}
            assert rows[ORDERS][0] == "silver.clean_orders"
            # TABLE, CHANGE, CHANGED BY, ROWS dev/main, FILES dev/main, SNAPSHOT dev/main, SCHEMA
            catalog = engine_of(app).state.catalog
            snapshot = {ref: catalog.load_table(ref, ORDERS).current_snapshot().snapshot_id for ref in ("dev", "main")}
            revenue = catalog.load_table("dev", REVENUE).current_snapshot().snapshot_id
            assert rows[REVENUE][1:] == ["added", "dev", "3 / -", "1 / -", f"{str(revenue)[:10]} / -", "+ id long"]
            assert rows[ORDERS][1:] == ["modified", "dev", "8 / 8", "2 / 2",
                                        f"{str(snapshot['dev'])[:10]} / {str(snapshot['main'])[:10]}",
                                        "+ note string"]
            assert rows[CUSTOMERS][1:3] == ["modified", "main"]  # main changed it, not dev
            assert rows[CUSTOMERS][3:5] == ["4 / 7", "1 / 3"] and rows[CUSTOMERS][6] == "-"
            assert "3 table(s) differ (2 changed on dev, 1 on main)" in screen_text(app)

            # merge dev: the dry run per table first; nothing changes until y
            main_before = dict(engine_of(app).table_pointers("main"))
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeDryRunScreen), 10)
            text = flat(screen_text(app))
            assert "Merge dev into main?" in text
            assert "gold.daily_revenue added 3 -" in text
            assert "silver.clean_orders modified 8 8" in text
            assert "2 table(s) would be applied to main in one commit" in text
            assert engine_of(app).table_pointers("main") == main_before
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Merged dev into main" in n for n in app.notices), 10)
            main_after = engine_of(app).table_pointers("main")
            dev = engine_of(app).table_pointers("dev")
            assert main_after[REVENUE] == dev[REVENUE] and main_after[ORDERS] == dev[ORDERS]
            assert main_after[CUSTOMERS] == main_before[CUSTOMERS]  # main's own change kept

            # hot: in conflict; the dialog says nothing will change and y does nothing
            goto(app, "hot")
            await settle(pilot)
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeDryRunScreen), 10)
            text = flat(screen_text(app))
            assert "bronze.raw_customers modified 9 7 conflict ✘" in text  # hot's rows, main's
            assert "bronze.raw_customers: the branch changed its schema" in text
            assert "1 conflict(s)" in text and "nothing will change" in text and "RAT-CAT-003" in text
            await pilot.press("y")
            await settle(pilot)
            assert isinstance(app.screen, MergeDryRunScreen)
            await pilot.press("escape")
            await settle(pilot)
            assert engine_of(app).table_pointers("main") == main_after

            # twin and main both only appended to raw_customers since twin forked: not a conflict, it merges by append
            goto(app, "twin")
            await wait_for(pilot, lambda: "Diff of twin against main" in screen_text(app), 10)
            await settle(pilot)
            diff = app.screen.query_one("#diff-table")
            rows = {key.value: [str(c) for c in diff.get_row(key)] for key in diff.rows}
            assert rows[CUSTOMERS][1:4] == ["modified", "⇉ both appended: merges", "8 / 7"]
            assert "1 appended on both (merge by append)" in screen_text(app)
            assert "in conflict" not in screen_text(app)
            goto(app, "hot")  # hot changed the schema too: a conflict
            await wait_for(pilot, lambda: "Diff of hot against main" in screen_text(app), 10)
            assert "1 in conflict" in screen_text(app)

            # feat came from dev: its merge goes into dev, not main
            goto(app, "feat")
            await settle(pilot)
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeDryRunScreen), 10)
            assert "Merge feat into dev?" in flat(screen_text(app))
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Merged feat into dev" in n for n in app.notices), 10)
            assert f"{NS}.gold.product_funnel" in engine_of(app).table_pointers("dev")
            assert f"{NS}.gold.product_funnel" not in engine_of(app).table_pointers("main")

            # delete a branch of yours: confirmation, then gone; the working ref goes back to main
            app.controller.switch_ref("feat")
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            assert "it goes back to main" in flat(screen_text(app))
            await pilot.press("y")
            await wait_for(pilot, lambda: "feat" not in [r.name for r in engine_of(app).refs()], 10)
            await settle(pilot)
            assert app.controller.ref == "main"
            assert not app.crashes

    run(go())


def dialog_text(app) -> list[str]:
    """The lines inside the dialog's border (not the screen beside it)."""
    return [line.split("█")[1] for line in screen_text(app).splitlines() if line.count("█") >= 2]


@pytest.mark.parametrize("size", [SMALL, (120, 40)], ids=["80x24", "large"])
def test_the_merge_dialog_lists_schema_changes_and_how_each_table_merges(project, size):
    """dev added a column to clean_orders, added daily_revenue, and appended to raw_customers while main did too:
    the dialog lists the schema change, says raw_customers merges by append and the other two as they are, and
    that the runs on dev passed their tests (never that untested data reaches main)."""
    from pyiceberg.types import StringType

    from ratui.engine.facade.engine import Engine

    root, _ = project
    engine = Engine.open(root)
    engine.create_branch("dev")
    write(engine, root, "dev", REVENUE, 3)
    table = engine.state.catalog.load_table("dev", ORDERS)
    with table.update_schema() as update:
        update.add_column("note", StringType())
    engine.state.catalog.record_commit("dev", "add note to clean_orders")
    write(engine, root, "dev", CUSTOMERS, 2, start=30)
    write(engine, root, "main", CUSTOMERS, 1, start=20)
    engine.close()
    app = make_app(root)

    async def go():
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            goto(app, "dev")
            await settle(pilot)
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MergeDryRunScreen), 10)
            await settle(pilot)
            seen = dialog_text(app)
            for _ in range(3):  # at 80x24 the body scrolls (pagedown); the buttons stay
                await pilot.press("pagedown")
                await settle(pilot)
                seen += dialog_text(app)
                assert "Merge (y)" in flat(screen_text(app))
            text = flat(" ".join(dict.fromkeys(seen)))  # each line once, in the order first seen
            assert "Schema changes: silver.clean_orders: + note string" in text
            assert "By append: bronze.raw_customers." in text
            assert "As is: gold.daily_revenue, silver.clean_orders. main gets them as dev has them" in text
            assert "every run merged into dev only after its quality tests passed" in text
            assert "tested or not" not in text

    run(go())


# ------------------------------------------------------------------------------------- history, rollback


def test_history_of_a_ref_and_of_a_table_and_rollback(project):
    root, first = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            await pilot.press("l")  # main's history
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 10)
            await settle(pilot)
            table = app.screen.query_one("#history-table")
            commits = engine_of(app).log("main")
            assert table.row_count == len(commits) == 4  # three runs and the first commit
            kinds = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
            assert kinds == ["run", "run", "run", "init"]
            runs = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
            assert runs[:3] == [RUN_3, RUN_2, RUN_1]
            pipelines = [str(table.get_row_at(i)[4]) for i in range(3)]
            assert pipelines == ["bronze.raw_customers @ c1", "silver.clean_orders @ v2e6f7",
                                 "silver.clean_orders @ v1a2b3"]
            assert str(table.get_row_at(1)[5]) == "silver.clean_orders · 8"
            text = screen_text(app)
            assert "History of main" in text and f"commit {commits[0].hash[:12]}" in text

            # o opens the commit's run
            await pilot.press("o")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == RUN_3
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("escape")  # back to Branches
            await settle(pilot)
            assert app.current_mode == "branches" and not isinstance(app.screen, HistoryScreen)

            # Pipelines h: the table's history only
            app.show_pipeline(ORDERS)
            await settle(pilot)
            await pilot.press("h")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 10)
            await settle(pilot)
            screen = app.screen
            assert screen.table == ORDERS and screen.ref == "main"
            table = screen.query_one("#history-table")
            assert table.row_count == 2
            assert [str(table.get_row_at(i)[3]) for i in range(2)] == [RUN_2, RUN_1]
            cells = [str(table.get_row_at(i)[5]) for i in range(2)]
            assert cells[0].endswith(" · 8") and cells[1].endswith(" · 5")

            # r on the older commit: the confirmation lists the change; n changes nothing; y rolls back
            before = engine_of(app).table_pointers("main")[ORDERS]
            await pilot.press("down", "r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            text = flat(screen_text(app))
            assert f"Roll {ORDERS} back to commit {first.hash[:12]}" in text
            assert "silver.clean_orders 8 → 5" in text
            plan = engine_of(app).plan_rollback("main", first.hash, ORDERS)
            change = plan.changes[0]
            assert f"{str(change.before.snapshot_id)[:10]} → {str(change.after.snapshot_id)[:10]}" in text
            assert "No landing file becomes loadable again" in text
            await pilot.press("n")
            await settle(pilot)
            assert engine_of(app).table_pointers("main")[ORDERS] == before
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Rolled " in n for n in app.notices), 10)
            await settle(pilot)
            pointers = engine_of(app).table_pointers("main")
            assert pointers[ORDERS] == first.pointers[ORDERS] != before
            assert pointers[CUSTOMERS] == engine_of(app).log("main")[1].tables[0]["location"]  # untouched
            # the rollback is a commit of its own, on top of the table's history
            table = app.screen.query_one("#history-table")
            assert table.row_count == 3 and str(table.get_row_at(0)[1]) == "rollback"
            assert not app.crashes

    run(go())


def test_whole_ref_rollback_and_refused_while_a_run_is_in_flight(project):
    root, first = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 10)
            await settle(pilot)
            screen = app.screen
            table = screen.query_one("#history-table")
            table.move_cursor(row=2)  # the first run's commit: clean_orders at 5 rows, no raw_customers
            await settle(pilot)

            # a run of clean_orders queued on main (this process: recovery leaves it be): refused, with the code
            history = engine_of(app).state.history
            RunRecord(history).create("260301120000bbbb01", ORDERS, "console", None, None, ref="main")
            before = dict(engine_of(app).table_pointers("main"))
            await pilot.press("r")
            await wait_for(pilot, lambda: any("RAT-CAT-011" in n for n in app.notices), 10)
            note = next(n for n in app.notices if "RAT-CAT-011" in n)
            assert "260301120000bbbb01" in note and "hint:" in note
            assert not isinstance(app.screen, ConfirmScreen)
            assert engine_of(app).table_pointers("main") == before

            # the run ends: the whole ref goes back, raw_customers leaves main
            RunRecord(history).update("260301120000bbbb01", status="cancelled")
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            text = flat(screen_text(app))
            assert "Roll every table of main back" in text
            assert "silver.clean_orders 8 → 5" in text and "bronze.raw_customers 4 → absent (dropped)" in text
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Rolled " in n for n in app.notices), 10)
            assert engine_of(app).table_pointers("main") == first.pointers
            assert not app.crashes

    run(go())


def test_rollback_when_the_table_moved_since_the_plan_says_so(project):
    root, first = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.show_pipeline(ORDERS)
            await settle(pilot)
            await pilot.press("h")
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.entries, 10)
            await settle(pilot)
            await pilot.press("down", "r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            write(engine_of(app), root, "main", ORDERS, 1, start=50)  # another process moved it meanwhile
            moved = engine_of(app).table_pointers("main")[ORDERS]
            await pilot.press("y")
            await wait_for(pilot, lambda: any("RAT-CAT-003" in n for n in app.notices), 10)
            assert engine_of(app).table_pointers("main")[ORDERS] == moved
            assert not app.crashes

    run(go())


# -------------------------------------------------------------------------------------- query time travel


def test_query_reads_a_past_state(project):
    from ratui.screens.query import PAST

    root, first = project
    app = make_app(root)

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("7")
            await settle(pilot)
            screen = app.screen
            picker = screen.query_one("#query-ref")

            async def ask(text: str) -> None:
                picker.value = PAST
                await settle(pilot)
                field = app.screen.query_one("#ref-prompt-input")
                field.value = text
                await pilot.press("enter")
                await settle(pilot)

            await ask(f"main@{first.hash[:10]}")  # a prefix of the hash will do
            assert screen.ref == f"main@{first.hash}"  # the prefix made whole: the picker entry stays exact
            assert screen.tables == [ORDERS]  # raw_customers came later
            assert picker.value == screen.ref
            assert f"reading main@{first.hash[:10]}" in screen_text(app)

            second = engine_of(app).log("main")[1]  # clean_orders at 8 rows, before raw_customers
            when = datetime.fromisoformat(second.created_at).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
            await ask(f"main at {when}")
            assert screen.ref == f"main@{second.hash}"
            assert f"(its state at {when})" in screen_text(app)

            await ask("main@abcdef99")  # no such commit: said with its code, the ref stays
            assert "RAT-CAT-010" in screen_text(app) and screen.ref == f"main@{second.hash}"
            await ask("at yesterday-ish")
            assert "RAT-CLI-001" in screen_text(app)
            assert not app.crashes

    run(go())


# ------------------------------------------------------------------------------------ atomic publish (Spark)


def test_atomic_publish_on_a_dev_branch(spark, tmp_path):
    """P on the working ref dev: raw_products with its descendants fails downstream (gold needs clean_orders, never
    built), so NOT published and dev is unchanged; the bronze layer then lands on dev in one commit, main untouched."""
    root = copy_sample(tmp_path)
    app = make_app(root, spark_state=None, clock=time.monotonic, now=utc_now)

    async def publish(pilot, select) -> str:
        before = len(app.notices)
        select()
        await settle(pilot)
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), 30)
        await wait_for(pilot, lambda: any(n.startswith("Publish:") for n in list(app.notices)[before:]), 300)
        note = next(n for n in list(app.notices)[before:] if n.startswith("Publish:"))
        await pilot.press("escape")
        await settle(pilot)
        return note

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: app.controller.engine is not None, 30)
            engine = engine_of(app)
            engine.create_branch("dev")
            app.controller.switch_ref("dev")
            tree = app.screen.query_one("#pipeline-tree")

            note = await publish(pilot, lambda: app.screen.select_key(f"{NS}.bronze.raw_products"))
            assert "NOT published: dev unchanged" in note and "did not succeed" in note, note
            assert engine.table_pointers("dev") == engine.table_pointers("main") == {}
            kept = [r.name for r in engine.refs() if r.name.startswith("publish-")]
            assert len(kept) == 1 and kept[0] in note  # kept for inspection
            assert f"{NS}.silver.product_catalog" in engine.table_pointers(kept[0])

            note = await publish(pilot, lambda: tree.move_cursor(app.screen.nodes[f"{NS}.bronze"]))
            bronze = {f"{NS}.bronze.{name}" for name in ("raw_customers", "raw_events", "raw_orders", "raw_products")}
            assert "Published 4 table(s) into dev" in note, note
            assert set(engine.table_pointers("dev")) == bronze and engine.table_pointers("main") == {}
            entry = engine.log("dev", limit=1)[0]
            assert entry.kind == "publish" and entry.hash[:12] in note
            assert [r.name for r in engine.refs() if r.name.startswith("publish-")] == kept  # this one merged
            assert not app.crashes

    run(go())


# --------------------------------------------------------------------------------------------- snapshots


class StubWorkflow(Controller):
    """Fixed refs, diffs and history (real hashes, snapshot ids and times are random)."""

    def branches(self):
        return [
            BranchRow("main", "9f86d081884c7d65", "2026-02-20T09:00:00.000000+00:00", None, 7),
            BranchRow("dev", "fd61a03af4f77d87", "2026-02-28T16:45:00.000000+00:00", None, 8),
            BranchRow("publish-4be0c2d1e9aa", "aa01b2c3d4e5f607", "2026-03-01T11:40:00.000000+00:00", None, 8),
        ]

    def diff(self, ref, against="main"):
        if ref == "main":
            return [DiffRow(f"{NS}.{k}", "table", False, None, TableState(4411 + i, 3 + i, rows))
                    for i, (k, rows) in enumerate([("bronze.raw_customers", 5000), ("silver.clean_orders", 12000)])]
        return [
            DiffRow(f"{NS}.gold.daily_revenue", "added", False, TableState(1203958812, None, 90, 1), None, "left",
                    ("+ day date", "+ revenue decimal(18,2)")),
            DiffRow(f"{NS}.silver.clean_orders", "modified", False, TableState(9911223344, None, 12010, 3),
                    TableState(4455667788, None, 12000, 2), "left", ("+ note string",)),
            DiffRow(f"{NS}.bronze.raw_customers", "modified", False, TableState(4411000001, None, 5000, 1),
                    TableState(4411000002, None, 5100, 2), "right"),
        ]

    def log(self, ref="main", table=None, limit=200):
        def item(key, change, snap, rows, run_id=None, version=None):
            out = {"table": f"{NS}.{key}", "change": change, "snapshot_id": snap, "rows": rows, "location": "x"}
            if run_id:
                out.update(run_id=run_id, version=version)
            return out

        entries = [
            LogEntry("c0ffee0000000005", ref, "2026-03-01T11:45:00.000000+00:00", "rollback silver.clean_orders to "
                     "b0a7000000000003 (run 260301110000aaaa02)", "rollback", None, None, None, [],
                     [item("silver.clean_orders", "modified", 5512093311, 12000)]),
            LogEntry("d00d000000000004", ref, "2026-03-01T11:40:00.000000+00:00", "publish 2 pipeline(s) into main",
                     "publish", None, None, None, ["260301113800aaaa05", "260301113900aaaa06"],
                     [item("gold.daily_revenue", "added", 1203958812, 90, "260301113900aaaa06", "9e8d7c6b5a"),
                      item("silver.clean_orders", "modified", 9911223344, 12010, "260301113800aaaa05",
                           "5a6b7c8d9e")]),
            LogEntry("b0a7000000000003", ref, "2026-03-01T11:00:00.000000+00:00", "run 260301110000aaaa02",
                     "run", "260301110000aaaa02", f"{NS}.silver.clean_orders", "4c5d6e7f80", [],
                     [item("silver.clean_orders", "modified", 5512093311, 12000, "260301110000aaaa02",
                           "4c5d6e7f80")]),
            LogEntry("a1b2000000000002", ref, "2026-03-01T10:30:00.000000+00:00", "merge dev into main", "merge",
                     None, None, None, ["260301102500aaaa01"],
                     [item("bronze.raw_customers", "modified", 4411000001, 5000, "260301102500aaaa01", "11aa22bb33")]),
            LogEntry("9f86000000000001", ref, "2026-02-20T09:00:00.000000+00:00", "init", "init", None, None, None,
                     [], []),
        ]
        if table:
            entries = [e for e in entries if any(t["table"] == table for t in e.tables)]
        return entries[:limit]


def stub_app(root):
    return make_app(root, controller=StubWorkflow(root))


def snap(snap_compare, app, *steps, size=SIZE):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            if callable(step):
                step(pilot.app)
            else:
                await pilot.press(*step)
            await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


def _dev_is_working(app) -> None:
    app.controller.ref = "dev"


@pytest.mark.parametrize("size", [(120, 40), SMALL], ids=["large", "80x24"])
def test_branches_with_a_user_branch_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, stub_app(seeded), _dev_is_working, ("4",), ("down",), size=size)


@pytest.mark.parametrize("size", [(120, 40), SMALL], ids=["large", "80x24"])
def test_history_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, stub_app(seeded), ("4",), ("l",), ("down",), size=size)


@pytest.mark.parametrize("size", [(120, 40), SMALL], ids=["large", "80x24"])
def test_pipelines_on_a_dev_branch_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, stub_app(seeded), _dev_is_working, ("4",), ("1",), size=size)
