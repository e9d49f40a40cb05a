"""Projects for the Python API's tests: one per module.

`offline_project` is written without Spark: the sample's pipelines, and tables on main committed by PyIceberg into
ratui's own catalog (two commits, so a past state can be read), with a value `<script>` in them and a run in the
history whose error says `<script>` too (the HTML tests). The notebook module builds its own copy with Spark, through
the API itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import SAMPLE

ORDERS = "ecommerce.silver.clean_orders"
SCRIPT = "<script>alert('x')</script>"


def copy_sample(root: Path) -> Path:
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return root


@pytest.fixture(scope="module")
def offline_project(tmp_path_factory):
    """{"root", "first" (main's first commit hash), "second"}: clean_orders holds 100 rows after the second commit
    (60 after the first); orders 7, 27, 47... have status SCRIPT."""
    from ratui.engine.facade.engine import Engine
    from ratui.engine.run.record import RunRecord

    root = copy_sample(tmp_path_factory.mktemp("api-offline") / "sample")
    engine = Engine.open(root)
    try:
        catalog = engine.state.catalog
        location = root / "ecommerce" / "warehouse" / "silver" / "clean_orders"
        schema = pa.schema([("order_id", pa.int64()), ("status", pa.string()), ("amount", pa.float64())])
        table = catalog.create_table("main", ORDERS, schema, location)

        def rows(start: int, stop: int) -> pa.Table:
            ids = list(range(start, stop))
            return pa.table({"order_id": ids, "status": [SCRIPT if i % 20 == 7 else "shipped" for i in ids],
                             "amount": [i * 1.5 for i in ids]}, schema=schema)

        table.append(rows(0, 60))
        first = catalog.record_commit("main", "write clean_orders", {"kind": "run", "pipeline": ORDERS})
        table = catalog.load_table("main", ORDERS)
        table.append(rows(60, 100))
        second = catalog.record_commit("main", "write clean_orders again", {"kind": "run", "pipeline": ORDERS})
        record = RunRecord(engine.state.history)
        record.create("261126100000aaaa01", ORDERS, "api", "incremental", None)
        record.update("261126100000aaaa01", status="failed", started_at="2026-11-26T10:00:00.000Z",
                      finished_at="2026-11-26T10:00:02.000Z", duration_ms=2000, error_code="RAT-SQL-001",
                      error_message=f"bad value {SCRIPT}")
    finally:
        engine.close()
    return {"root": root, "first": first.hash, "second": second.hash}
