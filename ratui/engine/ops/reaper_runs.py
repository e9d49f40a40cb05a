"""The reaper's tasks over runs and their branches (ops/reaper.py lists every task):

    stuck_runs        runs `running` longer than the timeout: failed through the run record (RAT-RUN-007); a run of
                      this very process is also interrupted through its runs in flight
    orphan_branches   `run-*` branches of runs that are over, and atomic publishes' branches kept when they did not
                      land, once older than the age
    run_history       finished runs past the newest few of their pipeline and older than the age, with their logs,
                      quality results and landings (the newest success of each pipeline on each ref is kept)
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.events import RunFinished
from ratui.engine.ops.reaper_pass import ReaperPass
from ratui.engine.ops.reaper_report import TaskReport
from ratui.engine.vocabulary import FINAL, MAIN, RUN_PREFIX, iso as _iso, parse_time


def stuck_runs(p: ReaperPass, task: TaskReport) -> None:
    timeout = timedelta(minutes=p.settings.reaper_stuck_run_timeout_minutes)
    me, here = os.getpid(), socket.gethostname()
    for run in p.history.runs_in(("running",), oldest_first=True):
        started = parse_time(run["started_at"] or run["queued_at"])
        if started is None or p.now - started <= timeout:
            continue
        ours = run["pid"] == me and run["host"] == here
        item = {"name": run["id"], "run_id": run["id"], "pipeline": run["pipeline"],
                "started_at": run["started_at"] or run["queued_at"], "pid": run["pid"], "host": run["host"],
                "minutes": round((p.now - started).total_seconds() / 60, 1), "this_process": ours}
        task.found.append(item)
        if p.dry_run:
            p.timed_out.add(run["id"])
            continue
        if ours and p.in_flight is not None:
            # interrupt it first: a cancel only reaches a run that is still pending or running
            try:
                item["cancel"] = p.in_flight.cancel(run["id"], error=RatuiError(
                    "RAT-RUN-007", f"run {run['id']} of {run['pipeline']} timed out after {item['minutes']:.0f} "
                    "minutes and was interrupted by the reaper"))
            except Exception as exc:  # the run is failed in the history either way
                item["cancel"] = f"error: {exc}"
        if _fail_timed_out(p, run, item, p.now):
            p.timed_out.add(run["id"])
            task.removed.append(item)
        else:
            task.kept.append({**item, "reason": "finished while the reaper looked"})


def _fail_timed_out(p: ReaperPass, run: dict[str, Any], item: dict[str, Any], now: datetime) -> bool:
    error = RatuiError("RAT-RUN-007", f"run {run['id']} of {run['pipeline']} was still running after "
                       f"{item['minutes']:.0f} minutes (reaper.stuck_run_timeout_minutes is "
                       f"{p.settings.reaper_stuck_run_timeout_minutes})")
    started = parse_time(run["started_at"] or run["queued_at"])
    duration = int((now - started).total_seconds() * 1000) if started else None
    if not p.record.fail_if_running(run["id"], error, _iso(now), duration, f"reaper: {error}"):
        return False
    if p.bus is not None:
        try:
            p.bus.emit(RunFinished(run["id"], run["pipeline"], "failed", 0, duration or 0, error.to_dict()))
        except Exception:  # an observer's failure is not the reaper's
            pass
    return True

# ------------------------------------------------------------------------------- orphan branches


def orphan_branches(p: ReaperPass, task: TaskReport) -> None:
    max_age = timedelta(hours=p.settings.reaper_orphan_branch_max_age_hours)
    live = p.live_runs()
    for ref in p.catalog.list_refs():
        if ref.name.startswith("publish-"):  # an atomic publish's branch, kept when it did not land
            _orphan_publish(p, task, ref, max_age)
            continue
        if ref.name == MAIN or not ref.name.startswith(RUN_PREFIX):
            continue
        run_id = ref.run_id or ref.name[len(RUN_PREFIX):]
        created = parse_time(ref.created_at)
        age_h = (p.now - created).total_seconds() / 3600 if created else None
        item = {"name": ref.name, "ref": ref.name, "run_id": run_id, "created_at": ref.created_at,
                "age_hours": round(age_h, 2) if age_h is not None else None}
        if run_id in live:
            if created is None or p.now - created > max_age:
                task.kept.append({**item, "reason": f"its run is still {live[run_id]['status']}"})
            continue
        if created is None or p.now - created <= max_age:
            continue
        task.found.append(item)
        if p.dry_run:
            p.branches_removed.add(ref.name)
            continue
        # the run may have been queued again under this id since we looked: check once more
        if run_id in p.live_runs():
            task.kept.append({**item, "reason": "its run started while the reaper looked"})
            continue
        try:
            p.catalog.delete_branch(ref.name)
        except RatuiError as exc:
            if exc.code != "RAT-CAT-002":
                raise
            task.kept.append({**item, "reason": "already deleted"})
            continue
        p.branches_removed.add(ref.name)
        task.removed.append(item)


def _orphan_publish(p: ReaperPass, task: TaskReport, ref, max_age: timedelta) -> None:
    created = parse_time(ref.created_at)
    age_h = (p.now - created).total_seconds() / 3600 if created else None
    item = {"name": ref.name, "ref": ref.name, "run_id": None, "created_at": ref.created_at,
            "age_hours": round(age_h, 2) if age_h is not None else None}
    if created is not None and p.now - created <= max_age:
        return
    if p.state.history.active_on(ref.name):
        task.kept.append({**item, "reason": "runs of its publish are still going"})
        return
    task.found.append(item)
    p.branches_removed.add(ref.name)
    if p.dry_run:
        return
    try:
        p.catalog.delete_branch(ref.name, in_tx=lambda conn: p.state.ledger.drop_ref(conn, ref.name))
    except RatuiError as exc:
        if exc.code != "RAT-CAT-002":
            raise
        task.kept.append({**item, "reason": "already deleted"})
        p.branches_removed.discard(ref.name)
        return
    task.removed.append(item)


def run_history(p: ReaperPass, task: TaskReport) -> None:
    keep = p.settings.reaper_run_history_keep_per_pipeline
    cutoff = p.now - timedelta(days=p.settings.reaper_run_history_max_age_days)
    rows, last_success = p.history.beyond_newest(keep, before=_iso(cutoff))
    for row in rows:
        if row["status"] not in FINAL:
            continue  # never a run that is still going
        at = parse_time(row["finished_at"] or row["started_at"] or row["queued_at"])
        if at is None or at >= cutoff:
            continue
        item = {"name": row["id"], "run_id": row["id"], "pipeline": row["pipeline"], "status": row["status"],
                "finished_at": row["finished_at"] or row["started_at"] or row["queued_at"]}
        if row["id"] in last_success:
            task.kept.append({**item, "reason": "newest successful run of its pipeline (change detection)"})
            continue
        task.found.append(item)
    if p.dry_run or not task.found:
        return
    deleted = p.record.delete_finished([i["run_id"] for i in task.found])
    task.removed = [i for i in task.found if i["run_id"] in deleted]

# ------------------------------------------------------------------------------- processed files
