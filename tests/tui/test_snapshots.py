"""Snapshot tests (pytest-textual-snapshot) for every screen and dialog, at a fixed 120x40, and every screen at
80x24 (the compact layout: panes share the width or stack, the footer keeps w, : and ?).

Deterministic by construction: seeded history with fixed ids, times and durations; a frozen clock; Spark's
state pinned; no blinking cursor; every worker awaited before the picture is taken. Branch data (hashes, snapshot
ids, creation times) comes from a stub, since real ones are random. Update with `--snapshot-update`.
"""

from __future__ import annotations

from ratui.console.controller import BranchRow, Controller, DiffRow, TableState
from ratui.engine.state.catalog.base import MergeResult

from .conftest import copy_sample, make_app, settle
from .seed import FAILED_RUN, SUCCESS_RUN

SIZE = (120, 40)


def snap(snap_compare, app, *steps, size=SIZE):
    """Take the picture after the app settles and after each step (keys as a tuple, or a callable on the app)."""

    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            if callable(step):
                step(pilot.app)
            else:
                await pilot.press(*step)
            await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


class StubBranches(Controller):
    """The real engine for everything but the catalog reads, which return fixed refs and diffs."""

    RUN = "260301113000abcd01"

    def branches(self):
        return [
            BranchRow("main", "9f86d081884c7d65", "2026-02-20T09:00:00.000000+00:00", None, 7),
            BranchRow("feature-revenue", "fd61a03af4f77d87", "2026-02-28T16:45:00.000000+00:00", None, 8),
            BranchRow(f"run-{self.RUN}", "60303ae22b998861", "2026-03-01T11:30:00.000000+00:00", self.RUN, 7),
        ]

    def diff(self, ref):
        if ref == "main":
            return [DiffRow(f"ecommerce.{k}", "table", False, None, TableState(4411 + i, 3 + i, rows))
                    for i, (k, rows) in enumerate([("bronze.raw_customers", 5000), ("bronze.raw_orders", 12400),
                                                   ("silver.clean_orders", 12000)])]
        return [
            DiffRow("ecommerce.gold.daily_revenue", "modified", False, TableState(7781203344, 4, 95),
                    TableState(5512093311, 3, 90)),
            DiffRow("ecommerce.gold.revenue_by_region", "added", False, TableState(1203958812, 1, 12), None),
            DiffRow("ecommerce.silver.clean_orders", "modified", True, TableState(9911223344, 6, 12010),
                    TableState(4455667788, 6, 12000)),
        ]

    def merge_preview(self, ref):
        return MergeResult(ref, "main", ["ecommerce.gold.daily_revenue", "ecommerce.gold.revenue_by_region",
                                         "ecommerce.silver.clean_orders"], None, True,
                           ["ecommerce.silver.clean_orders"])


def stub_app(root):
    return make_app(root, controller=StubBranches(root))


def test_pipelines(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded))


def test_pipelines_with_errors(snap_compare, broken):
    def select(app):
        screen = app.screen
        screen.query_one("#pipeline-tree").move_cursor(screen.nodes["ecommerce.silver.product_catalog"])

    assert snap(snap_compare, make_app(broken), select)


def test_run_detail_failed(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), lambda app: app.open_run(FAILED_RUN))


def test_run_detail_success_with_warning(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), lambda app: app.open_run(SUCCESS_RUN))


def test_runs(snap_compare, paged_for_snapshots):
    assert snap(snap_compare, make_app(paged_for_snapshots), ("2",))


def test_runs_filtered(snap_compare, paged_for_snapshots):
    assert snap(snap_compare, make_app(paged_for_snapshots), ("2",), ("slash", *"status:failed", "enter"))


def test_quality(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), ("3",))


def test_quality_of_a_run_with_sql(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), lambda app: app.open_quality(FAILED_RUN), ("s",))


def test_branches(snap_compare, seeded):
    assert snap(snap_compare, stub_app(seeded), ("4",), ("down",))


def test_merge_preview_with_conflict(snap_compare, seeded):
    assert snap(snap_compare, stub_app(seeded), ("4",), ("down",), ("m",))


def test_delete_confirmation(snap_compare, seeded):
    assert snap(snap_compare, stub_app(seeded), ("4",), ("down",), ("d",))


def test_help(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), ("question_mark",))


def test_jump(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), ("colon", *"bra"))


def test_error_screen(snap_compare, tmp_path):
    root = copy_sample(tmp_path)
    (root / "ratui.yaml").write_text("namespace: ecommerce\nspark: [local\n")
    assert snap(snap_compare, make_app(root))


def test_landing(snap_compare, tmp_path):
    from .test_watch_landing_reaper import seed_ledger

    root = copy_sample(tmp_path)
    seed_ledger(root)
    assert snap(snap_compare, make_app(root), ("5",))


def test_landing_reset_confirmation(snap_compare, tmp_path):
    from .test_watch_landing_reaper import seed_ledger

    root = copy_sample(tmp_path)
    seed_ledger(root)
    assert snap(snap_compare, make_app(root), ("5",), ("u",))


def test_reaper(snap_compare, tmp_path):
    """Settings and schedule, before any pass (a pass stores its real start time)."""
    root = copy_sample(tmp_path)
    assert snap(snap_compare, make_app(root), ("6",))


def test_watch_on(snap_compare, seeded):
    """The status line while watching (the watcher's runner records instead of running)."""
    from .test_watch_landing_reaper import RecordingWatch

    # the "Watching ..." toast arrives from the watcher's thread: clear it so only the status line is pictured
    assert snap(snap_compare, make_app(seeded, controller=RecordingWatch(seeded)), ("w",),
                lambda app: app.clear_notifications())


# ---------------------------------------------------------------------------------------------------- 80x24

SMALL = (80, 24)


def test_pipelines_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), size=SMALL)


def test_run_detail_failed_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), lambda app: app.open_run(FAILED_RUN), size=SMALL)


def test_runs_80x24(snap_compare, paged_for_snapshots):
    assert snap(snap_compare, make_app(paged_for_snapshots), ("2",), size=SMALL)


def test_quality_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), ("3",), size=SMALL)


def test_branches_80x24(snap_compare, seeded):
    assert snap(snap_compare, stub_app(seeded), ("4",), ("down",), size=SMALL)


def test_landing_80x24(snap_compare, tmp_path):
    from .test_watch_landing_reaper import seed_ledger

    root = copy_sample(tmp_path)
    seed_ledger(root)
    assert snap(snap_compare, make_app(root), ("5",), size=SMALL)


def test_reaper_80x24(snap_compare, tmp_path):
    assert snap(snap_compare, make_app(copy_sample(tmp_path)), ("6",), size=SMALL)


def test_help_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), ("question_mark",), size=SMALL)
