"""Fixed history for deterministic console tests: runs, phase profiles, quality results and logs.

Everything here has fixed ids, timestamps and durations, so screens built from it render the same every time.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ratui.engine.state.history import History
from ratui.engine.run.record import RunRecord

FIXED_NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
NS = "ecommerce"

# pipeline -> (strategy, [(status, duration_ms, rows)] oldest first)
PLAN = {
    "bronze.raw_customers": ("full_refresh", [("success", 4100, 5000), ("success", 3900, 5000),
                                              ("success", 4400, 5000)]),
    "bronze.raw_events": ("append_only", [("success", 6100, 90000), ("success", 5200, 0)]),
    "bronze.raw_orders": ("full_refresh", [("success", 5000, 12000), ("failed", 2100, 0),
                                           ("success", 5600, 12400)]),
    "bronze.raw_products": ("full_refresh", [("success", 2500, 400)]),
    "silver.clean_customers": ("incremental", [("success", 3000, 5000), ("cancelled", 1200, 0)]),
    "silver.clean_orders": ("incremental", [("success", 7000, 12000), ("success", 4000, 400),
                                            ("failed", 6500, 0)]),
    "silver.product_catalog": ("full_refresh", [("success", 2100, 400)]),
    "gold.daily_revenue": ("full_refresh", [("success", 3300, 90)]),
}

PHASE_SPLIT = (("branch", 0.02), ("config", 0.01), ("build", 0.55), ("write", 0.25), ("quality", 0.15),
               ("resolve", 0.02))

# why each pipeline's runs after its first ran (its first is a rebuild: "first run")
WHY = {
    "bronze.raw_customers": "landing files changed: customers",
    "bronze.raw_events": "landing files changed: events",
    "bronze.raw_orders": "landing files changed: orders",
    "silver.clean_customers": "upstream changed: bronze.raw_customers",
    "silver.clean_orders": "upstream changed: bronze.raw_orders",
}

FAILED_RUN = "260301110000cafe01"  # silver.clean_orders, quality gate failed
SUCCESS_RUN = "260301103000beef01"  # bronze.raw_customers, the newest success


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _phases(status: str, duration: int) -> dict[str, int]:
    out: dict[str, int] = {}
    upto = {"success": 6, "failed": 5, "cancelled": 3}.get(status, 6)
    for name, share in PHASE_SPLIT[:upto]:
        out[name] = int(duration * share)
    return out


def seed_history(root: Path, bulk: int = 0) -> dict[str, str]:
    """Write the fixed runs into the project's history; `bulk` adds that many extra old runs (paging)."""
    history = History(root / ".ratui" / "ratui.db")
    base = datetime(2026, 3, 1, 8, 0, 0, tzinfo=timezone.utc)
    rows = []
    minute = 0
    for short, (strategy, runs) in PLAN.items():
        for index, (status, duration, written) in enumerate(runs):
            minute += 7
            started = base + timedelta(minutes=minute)
            run_id = started.strftime("%y%m%d%H%M%S") + f"{minute:04x}{index:02d}"
            run_type = "rebuild" if index == 0 else "full" if strategy == "full_refresh" else "incremental"
            row = {
                "id": run_id, "pipeline": f"{NS}.{short}", "status": status, "trigger": "cli",
                "strategy": strategy, "run_type": run_type, "reason": WHY[short] if index else "first run",
                "queued_at": _iso(started), "started_at": _iso(started),
                "finished_at": _iso(started + timedelta(milliseconds=duration)), "duration_ms": duration,
                "rows_written": written, "warnings": 0, "branch": f"run-{run_id}",
                "phases": json.dumps(_phases(status, duration)),
            }
            if status == "failed":
                row.update(error_code="RAT-SQL-001", error_message="[UNRESOLVED_COLUMN] A column `x` cannot be "
                           "resolved", error_hint="Fix the SQL; the Spark message says what failed.")
            if status == "cancelled":
                row.update(error_code="RAT-RUN-001", error_message=f"run {run_id} was cancelled",
                           error_hint="The run was cancelled; main is unchanged.")
            rows.append(row)
    # the newest two: a success of raw_customers (with logs) and a quality-gate failure of clean_orders
    started = datetime(2026, 3, 1, 10, 30, 0, tzinfo=timezone.utc)
    rows.append({
        "id": SUCCESS_RUN, "pipeline": f"{NS}.bronze.raw_customers", "status": "success", "trigger": "console",
        "strategy": "full_refresh", "run_type": "full", "reason": WHY["bronze.raw_customers"],
        "queued_at": _iso(started), "started_at": _iso(started),
        "finished_at": _iso(started + timedelta(milliseconds=4321)), "duration_ms": 4321, "rows_written": 5000,
        "warnings": 1, "branch": f"run-{SUCCESS_RUN}", "phases": json.dumps(_phases("success", 4321)),
    })
    started = datetime(2026, 3, 1, 11, 0, 0, tzinfo=timezone.utc)
    rows.append({
        "id": FAILED_RUN, "pipeline": f"{NS}.silver.clean_orders", "status": "failed", "trigger": "console",
        "strategy": "incremental", "run_type": "incremental", "reason": WHY["silver.clean_orders"],
        "queued_at": _iso(started), "started_at": _iso(started),
        "finished_at": _iso(started + timedelta(milliseconds=8765)), "duration_ms": 8765, "rows_written": 0,
        "warnings": 1, "branch": f"run-{FAILED_RUN}", "phases": json.dumps(_phases("failed", 8765)),
        "error_code": "RAT-RUN-003",
        "error_message": "quality gate failed for ecommerce.silver.clean_orders: positive_amounts (3 rows)",
        "error_hint": "An error-severity quality test found violations; main is unchanged. See the quality results.",
    })
    for i in range(bulk):
        started = datetime(2025, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=i)
        rows.append({
            "id": started.strftime("%y%m%d%H%M%S") + f"{i:06x}", "pipeline": f"{NS}.bronze.raw_products",
            "status": "success" if i % 5 else "failed", "trigger": "cron", "strategy": "full_refresh",
            "queued_at": _iso(started), "started_at": _iso(started),
            "finished_at": _iso(started + timedelta(seconds=2)), "duration_ms": 2000 + i % 700, "rows_written": 400,
            "warnings": 0, "phases": json.dumps(_phases("success", 2000 + i % 700)),
            "error_code": None if i % 5 else "RAT-SQL-001",
        })
    history.db["runs"].insert_all(rows, batch_size=2000)

    finished = _iso(datetime(2026, 3, 1, 11, 0, 8, tzinfo=timezone.utc))
    tests = [
        ("positive_amounts", "error", "failed", 3, ["order_id", "quantity", "unit_price", "amount"],
         [[1017, 2, "-4.50", "-9.00"], [2231, 1, "-1.00", "-1.00"], [4410, 3, None, None]]),
        ("updated_after_order_date", "warn", "warned", 12, ["order_id", "order_date", "updated_at"],
         [[88, "2026-01-04", "2026-01-03 23:10:00"], [312, "2026-02-11", "2026-02-10 08:00:00"]]),
        ("not_null_keys", "error", "passed", 0, [], []),
        ("unique_order_id", "error", "passed", 0, [], []),
        ("valid_status", "error", "passed", 0, [], []),
    ]
    for index, (test, severity, status, violations, columns, sample) in enumerate(tests):
        RunRecord(history).add_quality(FAILED_RUN, {
            "test": test, "severity": severity, "status": status, "violations": violations,
            "duration_ms": 300 + index * 40, "columns": columns, "sample": sample,
            "sql": f"-- @severity: {severity}\nSELECT *\nFROM {{{{ this }}}}\nWHERE amount <= 0",
            "error": None, "file": str(root / f"{NS}/pipelines/silver/clean_orders/tests/quality/{test}.sql"),
            "finished_at": finished,
        })
    RunRecord(history).add_quality(SUCCESS_RUN, {
        "test": "unique_customer_id", "severity": "warn", "status": "warned", "violations": 2, "duration_ms": 210,
        "columns": ["customer_id", "n"], "sample": [[7, 2], [19, 2]], "sql": "SELECT customer_id, count(*) AS n",
        "error": None, "file": None, "finished_at": _iso(datetime(2026, 3, 1, 10, 30, 4, tzinfo=timezone.utc)),
    })
    logs = [
        (SUCCESS_RUN, "10:30:00", "info", f"branch run-{SUCCESS_RUN} created from main"),
        (SUCCESS_RUN, "10:30:00", "info", "sql pipeline, strategy full_refresh"),
        (SUCCESS_RUN, "10:30:01", "info", "landing zone customers: 1 csv file(s)"),
        (SUCCESS_RUN, "10:30:01", "debug", "compiled SQL:\nSELECT * FROM landing"),
        (SUCCESS_RUN, "10:30:03", "info", "result: 5000 rows, 7 columns"),
        (SUCCESS_RUN, "10:30:03", "info", "full_refresh: 5000 rows written, 1 files added, 0 removed"),
        (SUCCESS_RUN, "10:30:04", "warning", "quality unique_customer_id [warn]: warned, 2 violating rows"),
        (SUCCESS_RUN, "10:30:04", "info", "merged run-" + SUCCESS_RUN + " into main (ecommerce.bronze.raw_customers)"),
        (FAILED_RUN, "11:00:00", "info", f"branch run-{FAILED_RUN} created from main"),
        (FAILED_RUN, "11:00:08", "warning", "quality positive_amounts [error]: failed, 3 violating rows"),
        (FAILED_RUN, "11:00:08", "error", "RAT-RUN-003 quality gate failed for ecommerce.silver.clean_orders"),
    ]
    history.db["run_logs"].insert_all(
        [{"run_id": r, "at": f"2026-03-01T{t}.000Z", "level": level, "message": m} for r, t, level, m in logs])
    history.close()
    return {"failed": FAILED_RUN, "success": SUCCESS_RUN}
