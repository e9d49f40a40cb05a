"""The merge dialog says, per table, how it merges: "by append" (both sides only appended: the branch's new files go
on top of the target's after the quality tests pass on the combined rows), "conflict" (with the reason), or "as is".
Snapshots at 80x24 and large, from a stub controller (real hashes, snapshot ids and times are random)."""

from __future__ import annotations

import pytest

from ratui.console.controller import BranchRow, Controller, DiffRow, TableState
from ratui.engine.state.catalog.base import MergeResult

from .conftest import make_app, settle

NS = "ecommerce"
EVENTS, ORDERS, REVENUE = f"{NS}.bronze.raw_events", f"{NS}.silver.clean_orders", f"{NS}.gold.daily_revenue"


class StubMerge(Controller):
    conflict = True

    def branches(self):
        return [
            BranchRow("main", "9f86d081884c7d65", "2026-02-20T09:00:00.000000+00:00", None, 7),
            BranchRow("dev", "fd61a03af4f77d87", "2026-02-28T16:45:00.000000+00:00", None, 8),
        ]

    def diff(self, ref, against="main"):
        if ref == "main":
            return []
        return [
            DiffRow(EVENTS, "modified", True, TableState(7781203344, None, 1300, 4),
                    TableState(5512093311, None, 1250, 3), "both"),
            DiffRow(ORDERS, "modified", self.conflict, TableState(9911223344, None, 12010, 3),
                    TableState(4455667788, None, 12000, 2), "both" if self.conflict else "left"),
            DiffRow(REVENUE, "added", False, TableState(1203958812, None, 90, 1), None, "left"),
        ]

    def merge_preview(self, ref):
        conflicts = [ORDERS] if self.conflict else []
        return MergeResult(ref, "main", [EVENTS, ORDERS, REVENUE], None, True, conflicts, by_append=[EVENTS],
                           reasons={ORDERS: "main made an overwrite (snapshot 4455667788)"} if self.conflict else {})


class StubClean(StubMerge):
    conflict = False


def snap(snap_compare, app, size):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for keys in (("4",), ("down",), ("m",)):
            await pilot.press(*keys)
            await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["large", "80x24"])
def test_merge_dialog_by_append_and_conflict_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, make_app(seeded, controller=StubMerge(seeded)), size)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["large", "80x24"])
def test_merge_dialog_all_by_append_snapshot(snap_compare, seeded, size):
    assert snap(snap_compare, make_app(seeded, controller=StubClean(seeded)), size)
