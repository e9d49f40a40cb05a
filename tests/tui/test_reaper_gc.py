"""The Reaper screen's preview (`p`) of what garbage collection would reclaim, grouped by what left the files: each
dropped table, each deleted branch, then plain orphans, a line per group with its files and bytes.

A pilot test on a real project (a table dropped on main and a branch deleted, both past the retention window) and
snapshots at 80x24 and 120x40 of a fixed report (real file names hold random ids, a real pass its start time).
"""

from __future__ import annotations

import os
import time

from ratui.console.controller import Controller
from ratui.engine.ops.reaper_report import ReaperReport, TaskReport
from ratui.screens.reaper import ReaperScreen

from .conftest import copy_sample, make_app, run, screen_text, settle
from .test_snapshots import SMALL, SIZE, snap


def orphan_item(path: str, size: int, kind: str, what: str | None = None) -> dict:
    item = {"name": path, "path": path, "bytes": size, "age_hours": 200.0, "kind": kind}
    if kind == "dropped_table":
        item["table"] = what
    elif kind == "deleted_branch":
        item["ref"] = what
    return item


TABLE = "ecommerce/warehouse/bronze/old_orders"
BRANCH_TABLE = "ecommerce/warehouse/silver/clean_orders"
ITEMS = [
    orphan_item(f"{TABLE}/data/00000-0-1f2e3d4c.parquet", 48_213, "dropped_table", "ecommerce.bronze.old_orders"),
    orphan_item(f"{TABLE}/metadata/00001-5a6b7c8d.metadata.json", 2_311, "dropped_table",
                "ecommerce.bronze.old_orders"),
    orphan_item(f"{TABLE}/metadata/snap-4411-0-1f2e3d4c.avro", 4_402, "dropped_table", "ecommerce.bronze.old_orders"),
    orphan_item(f"{BRANCH_TABLE}/data/00000-0-9a8b7c6d.parquet", 120_880, "deleted_branch", "feature-revenue"),
    orphan_item(f"{BRANCH_TABLE}/metadata/00007-3c4d5e6f.metadata.json", 3_120, "deleted_branch", "feature-revenue"),
    orphan_item(f"{BRANCH_TABLE}/data/junk-0.parquet", 10, "orphan"),
]


class FixedPreview(Controller):
    """The real engine for everything but the reaper's pass and its stored reports."""

    def reaper_run(self, dry_run):
        task = TaskReport("orphan_files", found=list(ITEMS), bytes_found=sum(i["bytes"] for i in ITEMS))
        return ReaperReport(7, "2026-03-01T12:00:00.000Z", "2026-03-01T12:00:01.000Z", True,
                            {"orphan_files": task})

    def reaper_reports(self, limit=20):
        return []


def test_preview_groups_snapshot_80x24(snap_compare, tmp_path):
    root = copy_sample(tmp_path)
    assert snap(snap_compare, make_app(root, controller=FixedPreview(root), reaper_schedule=False), ("6",), ("p",),
                size=SMALL)


def test_preview_groups_snapshot_large(snap_compare, tmp_path):
    root = copy_sample(tmp_path)
    assert snap(snap_compare, make_app(root, controller=FixedPreview(root), reaper_schedule=False), ("6",), ("p",),
                size=SIZE)


def test_preview_lists_a_dropped_table_and_a_deleted_branch_of_a_real_project(tmp_path):
    from ratui.engine.facade.engine import Engine
    from tests.engine.ops.test_gc import drop, write
    from tests.engine.ops.test_reaper import age_catalog, age_tree

    root = copy_sample(tmp_path)
    engine = Engine.open(root)
    write(engine, "main", "ecommerce.bronze.old_orders", 2, 0)
    drop(engine, "main", "ecommerce.bronze.old_orders")
    engine.state.catalog.create_branch("feature-revenue")
    write(engine, "feature-revenue", "ecommerce.silver.scratch", 1, 0)
    engine.state.catalog.delete_branch("feature-revenue")
    age_tree(root / "ecommerce/warehouse", 24 * 10)
    age_catalog(engine, days=10)
    dropped = sorted(p for p in (root / "ecommerce/warehouse/bronze/old_orders").rglob("*") if p.is_file())
    size = sum(os.path.getsize(p) for p in dropped)
    engine.close()
    app = make_app(root, reaper_schedule=False)

    async def go():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            await pilot.press("6")
            await settle(pilot)
            assert isinstance(app.screen, ReaperScreen)
            await pilot.press("p")
            deadline = time.monotonic() + 30
            while app.screen.preview is None and time.monotonic() < deadline:
                await pilot.pause(0.2)
            await settle(pilot)
            text = screen_text(app)
            from ratui.engine.vocabulary import format_bytes

            assert f"dropped table ecommerce.bronze.old_orders: {len(dropped)} file(s)" in text
            assert format_bytes(size) in text
            assert "deleted branch feature-revenue:" in text
            assert text.index("dropped table") < text.index("deleted branch")
            assert all(p.exists() for p in dropped)  # a preview removes nothing
            assert not app.crashes

    run(go())
