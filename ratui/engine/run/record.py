"""The run record: the one writer of every row of the run tables (their schema and every read are
state/history.py's).

    runs              one row per run: queued, started, each phase's time and state, the outcome, the merge stamp
    run_logs          a run's log lines
    quality_results   a run's quality test outcomes
    cancel_requests   a cancel another process asked for (`ratui cancel`, a second console, the reaper)
    landings          a run's result reaching another ref through a branch merge

The facade and the invocation queue and skip runs here, the executor records a run's phases and outcome, recovery
finishes dead runs, the reaper fails stuck runs and deletes old ones, a branch merge and an undo write their lines
inside their own transaction (the `*_in_tx` functions, on the caller's connection). tests/engine/test_record_owners.py
fails when another module writes these tables.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from ratui.engine.state.db import write_tx
from ratui.engine.state.history import History
from ratui.engine.state.processes import started_at
from ratui.engine.vocabulary import FINAL, MAIN, now_iso

JSON_COLUMNS = ("phases", "write", "notes", "fingerprint", "inputs", "phase_status", "diff")


class RunRecord:
    """Writes through the history's connection, under its lock (one connection per project state)."""

    def __init__(self, history: History):
        self.history = history

    # ------------------------------------------------------------------------------------- a run's life

    def create(self, run_id: str, pipeline: str, trigger: str, strategy: str | None, invocation: str | None,
               run_type: str | None = None, reason: str | None = None, ref: str = MAIN,
               schedule: str | None = None) -> None:
        """A new run, pending (queued, or about to be recorded as skipped); `schedule`: the one that fired it."""
        with self.history.writer() as db:
            db.table("runs").insert({
                "id": run_id, "pipeline": pipeline, "status": "pending", "trigger": trigger, "strategy": strategy,
                "queued_at": now_iso(), "rows_written": 0, "warnings": 0, "invocation": invocation,
                "pid": os.getpid(), "host": socket.gethostname(), "pid_started": started_at(),
                "run_type": run_type, "reason": reason, "ref": ref, "schedule": schedule,
            })

    def record_skipped(self, runs: list[dict[str, Any]]) -> None:
        """Runs decided not to run, each created (or, if `queued`, updated) as skipped with its log line, all in
        one transaction: a no-op run of 1,500 pipelines is one commit, not 4,500. Each item: id, pipeline,
        trigger, strategy, invocation, ref, reason, queued (bool), and optionally error_code/_message/_hint."""
        if not runs:
            return
        stamp = now_iso()
        host, pid, pid_started = socket.gethostname(), os.getpid(), started_at()
        with self.history.writer() as db, write_tx(db.conn) as conn:
            conn.executemany(
                "insert into runs (id, pipeline, status, trigger, strategy, queued_at, rows_written, warnings, "
                "invocation, pid, host, pid_started, run_type, reason, ref, schedule) "
                "values (?, ?, 'pending', ?, ?, ?, 0, 0, ?, ?, ?, ?, 'skip', ?, ?, ?)",
                [(r["id"], r["pipeline"], r["trigger"], r["strategy"], stamp, r["invocation"], pid, host,
                  pid_started, r["reason"], r["ref"], r.get("schedule")) for r in runs if not r.get("queued")])
            conn.executemany(
                "update runs set status = 'skipped', run_type = 'skip', reason = ?, started_at = ?, finished_at = ?, "
                "duration_ms = 0, error_code = ?, error_message = ?, error_hint = ? where id = ?",
                [(r["reason"], stamp, stamp, r.get("error_code"), r.get("error_message"), r.get("error_hint"),
                  r["id"]) for r in runs])
            conn.executemany("insert into run_logs (run_id, at, level, message) values (?, ?, 'info', ?)",
                             [(r["id"], stamp, f"skipped: {r['reason']}") for r in runs])

    def update(self, run_id: str, **values: Any) -> None:
        """Set these columns of the run (dicts and lists of the JSON columns are stored as JSON)."""
        for key in JSON_COLUMNS:
            if key in values and not isinstance(values[key], (str, type(None))):
                values[key] = json.dumps(values[key], sort_keys=True)
        with self.history.writer() as db:
            db.table("runs").update(run_id, values, alter=True)

    def claim_unfinished(self, run_id: str, **values: Any) -> bool:
        """Finish a run only if it is still pending or running (two processes may notice one dead run at once:
        only one of them records it). Returns whether this call did."""
        columns = ", ".join(f"{key} = ?" for key in values)
        with self.history.writer() as db:
            cur = db.conn.execute(f"UPDATE runs SET {columns} WHERE id = ? AND status IN ('pending', 'running')",
                                  [*values.values(), run_id])
            return cur.rowcount == 1

    def log(self, run_id: str, level: str, message: str) -> None:
        with self.history.writer() as db:
            db.table("run_logs").insert({"run_id": run_id, "at": now_iso(), "level": level, "message": message})

    def add_quality(self, run_id: str, result: dict[str, Any]) -> None:
        row = dict(result)
        row["run_id"] = run_id
        row["sample"] = json.dumps(row.get("sample") or [], default=str)
        row["columns"] = json.dumps(row.get("columns") or [])
        row.setdefault("finished_at", now_iso())
        with self.history.writer() as db:
            db.table("quality_results").insert(row, alter=False)

    def request_cancel(self, run_id: str, pid: int, host: str) -> None:
        with self.history.writer() as db:
            db.table("cancel_requests").insert({"run_id": run_id, "requested_at": now_iso(), "pid": pid,
                                                "host": host}, replace=True)

    # ----------------------------------------------------------------------------------- the reaper's

    def fail_if_running(self, run_id: str, error: Any, finished_at: str, duration_ms: int | None,
                        log_message: str) -> bool:
        """Fail a run that is still running (the reaper's timeout), with its log line; False if it ended
        meanwhile."""
        with self.history.writer() as db, write_tx(db.conn) as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'failed', finished_at = ?, duration_ms = ?, error_code = ?,"
                " error_message = ?, error_hint = ? WHERE id = ? AND status = 'running'",
                (finished_at, duration_ms, error.code, error.message, error.hint, run_id))
            if cur.rowcount == 1:
                conn.execute("INSERT INTO run_logs (run_id, at, level, message) VALUES (?, ?, 'error', ?)",
                             (run_id, finished_at, log_message))
        return cur.rowcount == 1

    def delete_finished(self, run_ids: list[str]) -> set[str]:
        """Delete these runs with their logs, quality results, cancel requests and landings, each only if it has
        ended (re-checked inside the transaction). Returns the ids deleted."""
        deleted: set[str] = set()
        final = ",".join("?" * len(FINAL))
        for start in range(0, len(run_ids), 500):
            chunk = run_ids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            with self.history.writer() as db, write_tx(db.conn) as conn:
                gone = [r[0] for r in conn.execute(
                    f"SELECT id FROM runs WHERE id IN ({marks}) AND status IN ({final})", [*chunk, *FINAL])]
                if gone:
                    ids = ",".join("?" * len(gone))
                    conn.execute(f"DELETE FROM quality_results WHERE run_id IN ({ids})", gone)
                    conn.execute(f"DELETE FROM run_logs WHERE run_id IN ({ids})", gone)
                    conn.execute(f"DELETE FROM cancel_requests WHERE run_id IN ({ids})", gone)
                    conn.execute(f"DELETE FROM landings WHERE run_id IN ({ids})", gone)
                    conn.execute(f"DELETE FROM runs WHERE id IN ({ids})", gone)
            deleted.update(gone)
        return deleted


# ------------------------------------------------------------------------ inside another action's transaction


def mark_merged_in_tx(conn: Any, run_id: str, at: str | None = None) -> None:
    """Inside the merge's own transaction (on its connection): the run's data is on its ref now (`at`: the merge
    commit's time). A process killed after this commit is still recorded as succeeded by crash recovery."""
    conn.execute("UPDATE runs SET merged_at = ? WHERE id = ?", (at or now_iso(), run_id))


def log_in_tx(conn: Any, run_id: str, level: str, message: str) -> None:
    """A line of a run's log written in another action's transaction, on its connection (an undo of the run's
    merge says so in the run's own log)."""
    conn.execute("INSERT INTO run_logs (run_id, at, level, message) VALUES (?, ?, ?, ?)",
                 (run_id, now_iso(), level, message))


def landings_in_tx(conn: Any, run_ids: list[str], pipelines: list[str], ref: str, at: str) -> None:
    """Inside a branch merge's transaction: these runs' results (of the merged pipelines) are on `ref` now."""
    if not run_ids or not pipelines:
        return
    runs, keys = ",".join("?" * len(run_ids)), ",".join("?" * len(pipelines))
    conn.execute(f"INSERT OR REPLACE INTO landings (run_id, ref, at) SELECT id, ?, ? FROM runs WHERE id IN "
                 f"({runs}) AND pipeline IN ({keys}) AND status = 'success'", (ref, at, *run_ids, *pipelines))
