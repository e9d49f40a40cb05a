"""Run history in the project's SQLite database (sqlite-utils): runs, quality results and run logs.

Writes are short; reads page with keyset-friendly ORDER BY on indexed columns so a history of 100,000
runs lists as fast as one of ten.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from ratui.engine.state import migrations
from ratui.engine.state.db import write_tx, open_db, sqlite_utils
from ratui.engine.vocabulary import FINAL, MAIN, iso, now_iso, parse_time
from ratui.engine.state.processes import started_at


RUN_COLUMNS = {
    "id": str, "pipeline": str, "status": str, "trigger": str, "strategy": str, "run_type": str,
    "reason": str, "queued_at": str, "started_at": str, "finished_at": str, "duration_ms": int,
    "rows_written": int, "warnings": int, "error_code": str, "error_message": str, "error_hint": str,
    "error_file": str, "error_line": int, "branch": str, "phases": str, "write": str, "notes": str,
    "pid": int, "host": str, "invocation": str,
    # the start time of process `pid` (processes.py): a reused pid is not the run's process
    "pid_started": float,
    # change detection: the definition's file hashes and the inputs the run read (JSON)
    "fingerprint": str, "inputs": str,
    # set in the merge's own transaction: a run killed after this point did land on main
    "merged_at": str,
    # each phase's final state (done | failed | cancelled), beside its duration in `phases`
    "phase_status": str,
    # the ref the run merges into (main unless a dev or publish branch); NULL in older databases means main
    "ref": str,
    # the hash of the pipeline's whole definition (SQL/Python, config, tests): its version
    "version": str,
    # a Python pipeline's isolation as applied ("confined: landlock-abi7 + seccomp"; isolation/levels.py)
    "isolation": str,
    # the run's data diff against its target (run/data_diff.py, JSON), with its gates' verdicts
    "diff": str,
}


# the statuses of a finished run, as the console's tree reads them (recent_by_pipeline)
RECENT_STATUSES = "('success', 'failed', 'cancelled')"


class History:
    def __init__(self, db_path: Path):
        migrations.migrate(db_path)  # an older ratui's database: its missing columns first
        self._conn = open_db(db_path)
        self._lock = threading.RLock()
        self.db = sqlite_utils.Database(self._conn)
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        with self._lock:
            if "runs" not in self.db.table_names():
                self.db.table("runs").create(RUN_COLUMNS, pk="id", if_not_exists=True)
                self.db.table("runs").create_index(["started_at"], if_not_exists=True)
                self.db.table("runs").create_index(["pipeline", "started_at"], if_not_exists=True)
                self.db.table("runs").create_index(["status"], if_not_exists=True)
            # change detection's newest success of a pipeline on a ref (last_success), and the runs that reached a
            # ref through a branch merge, newest first: index lookups however long the history
            self.db.execute("create index if not exists runs_success_on on runs(pipeline, coalesce(ref, 'main'), "
                            "coalesce(merged_at, started_at) desc, started_at desc) where status = 'success'")
            if "landings" in self.db.table_names():
                self.db.execute("create index if not exists landings_at on landings(ref, at desc)")
            # newest-first paging (the runs list) without sorting the whole history
            self.db.execute("create index if not exists runs_newest on runs(coalesce(started_at, queued_at) desc, "
                            "id desc)")
            if "cancel_requests" not in self.db.table_names():
                # another process (`ratui cancel`, a second console) asks; the running process honours it
                self.db.table("cancel_requests").create({"run_id": str, "requested_at": str, "pid": int, "host": str},
                                                  pk="run_id", if_not_exists=True)
            if "quality_results" not in self.db.table_names():
                self.db.table("quality_results").create({
                    "id": int, "run_id": str, "test": str, "severity": str, "status": str, "violations": int,
                    "duration_ms": int, "sample": str, "columns": str, "sql": str, "error": str, "file": str,
                    "finished_at": str, "line": int,
                }, pk="id", if_not_exists=True)
                self.db.table("quality_results").create_index(["run_id"], if_not_exists=True)
            if "landings" not in self.db.table_names():
                # a run merged into a branch that was then merged into another ref landed there too
                self.db.execute("create table if not exists landings (run_id text not null, ref text not null, "
                                "at text not null, primary key (run_id, ref))")
                self.db.execute("create index if not exists landings_at on landings(ref, at desc)")
            if "run_logs" not in self.db.table_names():
                self.db.table("run_logs").create({"id": int, "run_id": str, "at": str, "level": str, "message": str},
                                           pk="id", if_not_exists=True)
                self.db.table("run_logs").create_index(["run_id"], if_not_exists=True)

    def close(self) -> None:
        """Under the lock: a thread in a query (the cancel poller, the monitor) finishes it first, and its next
        call fails cleanly on the closed connection (closing under a running statement crashed the process)."""
        with self._lock:
            self._conn.close()

    # ------------------------------------------------------------------------------------------- writes

    def create_run(self, run_id: str, pipeline: str, trigger: str, strategy: str | None, invocation: str | None,
                   run_type: str | None = None, reason: str | None = None, ref: str = MAIN) -> None:
        with self._lock:
            self.db.table("runs").insert({
                "id": run_id, "pipeline": pipeline, "status": "pending", "trigger": trigger, "strategy": strategy,
                "queued_at": now_iso(), "rows_written": 0, "warnings": 0, "invocation": invocation,
                "pid": os.getpid(), "host": socket.gethostname(), "pid_started": started_at(),
                "run_type": run_type, "reason": reason, "ref": ref,
            })

    def record_skipped(self, runs: list[dict[str, Any]]) -> None:
        """Runs decided not to run, each created (or, if `queued`, updated) as skipped with its log line, all in
        one transaction: a no-op run of 1,500 pipelines is one commit, not 4,500. Each item: id, pipeline,
        trigger, strategy, invocation, ref, reason, queued (bool), and optionally error_code/_message/_hint."""
        if not runs:
            return
        stamp = now_iso()
        host, pid, pid_started = socket.gethostname(), os.getpid(), started_at()
        with self._lock, write_tx(self._conn) as conn:
            conn.executemany(
                "insert into runs (id, pipeline, status, trigger, strategy, queued_at, rows_written, warnings, "
                "invocation, pid, host, pid_started, run_type, reason, ref) "
                "values (?, ?, 'pending', ?, ?, ?, 0, 0, ?, ?, ?, ?, 'skip', ?, ?)",
                [(r["id"], r["pipeline"], r["trigger"], r["strategy"], stamp, r["invocation"], pid, host,
                  pid_started, r["reason"], r["ref"]) for r in runs if not r.get("queued")])
            conn.executemany(
                "update runs set status = 'skipped', run_type = 'skip', reason = ?, started_at = ?, finished_at = ?, "
                "duration_ms = 0, error_code = ?, error_message = ?, error_hint = ? where id = ?",
                [(r["reason"], stamp, stamp, r.get("error_code"), r.get("error_message"), r.get("error_hint"),
                  r["id"]) for r in runs])
            conn.executemany("insert into run_logs (run_id, at, level, message) values (?, ?, 'info', ?)",
                             [(r["id"], stamp, f"skipped: {r['reason']}") for r in runs])

    def update_run(self, run_id: str, **values: Any) -> None:
        for key in ("phases", "write", "notes", "fingerprint", "inputs", "phase_status", "diff"):
            if key in values and not isinstance(values[key], (str, type(None))):
                values[key] = json.dumps(values[key], sort_keys=True)
        with self._lock:
            self.db.table("runs").update(run_id, values, alter=True)

    def request_cancel(self, run_id: str, pid: int, host: str) -> None:
        with self._lock:
            self.db.table("cancel_requests").insert(
                {"run_id": run_id, "requested_at": now_iso(), "pid": pid, "host": host}, replace=True)

    def cancel_requested(self, run_ids: list[str]) -> list[str]:
        if not run_ids:
            return []
        marks = ",".join("?" * len(run_ids))
        with self._lock:
            return [r["run_id"] for r in self.db.query(
                f"select run_id from cancel_requests where run_id in ({marks})", run_ids)]

    def unfinished_runs(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.db.query(
                "select id, pipeline, status, pid, pid_started, host, branch, started_at, queued_at, merged_at, ref "
                "from runs "
                "where status in ('pending', 'running')"))

    def claim_unfinished(self, run_id: str, **values: Any) -> bool:
        """Finish a run only if it is still pending or running (two processes may notice one dead run at once:
        only one of them records it). Returns whether this call did."""
        columns = ", ".join(f"{key} = ?" for key in values)
        with self._lock:
            cur = self._conn.execute(
                f"UPDATE runs SET {columns} WHERE id = ? AND status IN ('pending', 'running')",
                [*values.values(), run_id])
            return cur.rowcount == 1

    @staticmethod
    def mark_merged(conn: Any, run_id: str, at: str | None = None) -> None:
        """Inside the merge's own transaction (on its connection): the run's data is on its ref now (`at`: the
        merge commit's time). A process killed after this commit is still recorded as succeeded by crash
        recovery."""
        conn.execute("UPDATE runs SET merged_at = ? WHERE id = ?", (at or now_iso(), run_id))

    @staticmethod
    def log_in_tx(conn: Any, run_id: str, level: str, message: str) -> None:
        """A line of a run's log written in another action's transaction, on its connection (an undo of the run's
        merge says so in the run's own log)."""
        conn.execute("INSERT INTO run_logs (run_id, at, level, message) VALUES (?, ?, ?, ?)",
                     (run_id, now_iso(), level, message))

    def add_log(self, run_id: str, level: str, message: str) -> None:
        with self._lock:
            self.db.table("run_logs").insert({"run_id": run_id, "at": now_iso(), "level": level, "message": message})

    def add_quality(self, run_id: str, result: dict[str, Any]) -> None:
        row = dict(result)
        row["run_id"] = run_id
        row["sample"] = json.dumps(row.get("sample") or [], default=str)
        row["columns"] = json.dumps(row.get("columns") or [])
        row.setdefault("finished_at", now_iso())
        with self._lock:
            self.db.table("quality_results").insert(row, alter=False)

    # -------------------------------------------------------------------------------------------- reads

    @staticmethod
    def _decode(row: dict[str, Any]) -> dict[str, Any]:
        for key in ("phases", "write", "notes", "phase_status", "diff"):
            if row.get(key):
                row[key] = json.loads(row[key])
        return row

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            rows = list(self.db.query("select * from runs where id = ?", [run_id]))
            if not rows:
                # let people type a unique prefix of a run id
                rows = list(self.db.query("select * from runs where id like ? limit 2", [run_id + "%"]))
                if len(rows) != 1:
                    return None
            run = self._decode(rows[0])
            run["quality"] = [self._decode_quality(q) for q in self.db.query(
                "select * from quality_results where run_id = ? order by id", [run["id"]])]
            run["logs"] = list(self.db.query("select at, level, message from run_logs where run_id = ? order by id",
                                             [run["id"]]))
        return run

    @staticmethod
    def _decode_quality(row: dict[str, Any]) -> dict[str, Any]:
        row["sample"] = json.loads(row["sample"] or "[]")
        row["columns"] = json.loads(row["columns"] or "[]")
        return row

    def last_success(self, pipeline: str, ref: str = MAIN, merged_before: str | None = None) -> dict[str, Any] | None:
        """The newest successful run of a pipeline on `ref` (its fingerprint and inputs drive change detection);
        `merged_before`: only runs merged before that time (what a branch created then inherited).

        Newest by when its result reached `ref`: the run's own merge for a run on `ref`, or the merge that brought
        it there (`landings`) for a run on another branch. Two index lookups, one per kind (runs_success_on and
        landings_at): with a million runs in the history each is a few pages, where one query ordering every
        success of the pipeline read thousands of rows (15 to 170 ms per pipeline)."""
        cutoff, params = "", [pipeline, ref]
        if merged_before is not None:
            cutoff, params = " and r.merged_at < ?", [*params, merged_before]
        columns = "r.id, r.fingerprint, r.inputs, r.finished_at, r.started_at"
        with self._lock:
            own = list(self.db.query(
                f"select {columns}, coalesce(r.merged_at, r.started_at) as at from runs r indexed by runs_success_on "
                f"where r.pipeline = ? and coalesce(r.ref, 'main') = ? and r.status = 'success'{cutoff} "
                "order by coalesce(r.merged_at, r.started_at) desc, r.started_at desc limit 1", params))
            landed = list(self.db.query(
                f"select {columns}, l.at as at from landings l join runs r on r.id = l.run_id "
                "where l.ref = ? and r.pipeline = ? and r.status = 'success'"
                + (" and l.at < ?" if merged_before is not None else "")
                + " order by l.at desc, r.started_at desc limit 1",
                [ref, pipeline] + ([merged_before] if merged_before is not None else [])))
        found = [row for row in own + landed]
        if not found:
            return None
        best = max(found, key=lambda row: (row["at"] or "", row["started_at"] or ""))
        return {k: best[k] for k in ("id", "fingerprint", "inputs", "finished_at")}

    @staticmethod
    def record_landings(conn: Any, run_ids: list[str], pipelines: list[str], ref: str, at: str) -> None:
        """Inside a branch merge's transaction: these runs' results (of the merged pipelines) are on `ref` now."""
        if not run_ids or not pipelines:
            return
        runs, keys = ",".join("?" * len(run_ids)), ",".join("?" * len(pipelines))
        conn.execute(f"INSERT OR REPLACE INTO landings (run_id, ref, at) SELECT id, ?, ? FROM runs WHERE id IN "
                     f"({runs}) AND pipeline IN ({keys}) AND status = 'success'", (ref, at, *run_ids, *pipelines))

    def versions(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """id -> {pipeline, version} of these runs."""
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            for start in range(0, len(run_ids), 500):
                chunk = run_ids[start:start + 500]
                for row in self.db.query(f"select id, pipeline, version from runs where id in "
                                         f"({','.join('?' * len(chunk))})", chunk):
                    out[row["id"]] = {"pipeline": row["pipeline"], "version": row["version"]}
        return out

    def active_on(self, ref: str, pipelines: list[str] | None = None) -> list[dict[str, Any]]:
        """Runs still going (any process) that will merge into `ref`, of these pipelines (default: any)."""
        with self._lock:
            rows = list(self.db.query(
                "select id, pipeline, status from runs where status in ('pending', 'running') and merged_at is null "
                "and coalesce(ref, 'main') = ?", [ref]))
        return [r for r in rows if pipelines is None or r["pipeline"] in pipelines]

    def _where(self, pipeline: str | None, status: str | None, text: str | None,
               ref: str | None = None) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if ref:
            clauses.append("coalesce(ref, 'main') = ?")
            params.append(ref)
        if pipeline:
            clauses.append("pipeline like ?")
            params.append(f"%{pipeline}%")
        if status:
            clauses.append("status = ?")
            params.append(status)
        if text:
            clauses.append("(pipeline like ? or id like ? or coalesce(error_message, '') like ? "
                           "or coalesce(error_code, '') like ?)")
            params.extend([f"%{text}%"] * 4)
        return (" where " + " and ".join(clauses)) if clauses else "", params

    def list_runs(self, limit: int = 50, offset: int = 0, *, pipeline: str | None = None, status: str | None = None,
                  text: str | None = None, ref: str | None = None) -> list[dict[str, Any]]:
        where, params = self._where(pipeline, status, text, ref)
        sql = f"select * from runs{where} order by coalesce(started_at, queued_at) desc, id desc limit ? offset ?"
        with self._lock:
            return [self._decode(r) for r in self.db.query(sql, [*params, limit, offset])]

    def count_runs(self, *, pipeline: str | None = None, status: str | None = None, text: str | None = None) -> int:
        where, params = self._where(pipeline, status, text)
        with self._lock:
            return next(self.db.query(f"select count(*) as n from runs{where}", params))["n"]

    def recent_by_pipeline(self, per_pipeline: int = 10,
                           pipelines: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """The last few finished runs of each pipeline (default: every pipeline with a run), newest first (status,
        duration: the console's tree and sparklines).

        One statement whatever the number of pipelines: for each pipeline (the given ones, or the distinct ones by
        a skip-scan of the (pipeline, started_at) index: one seek per pipeline, never a scan of the history), its
        newest finished runs by a seek of that same index. A history of 1M runs reads like one of ten.
        """
        if pipelines is not None and not pipelines:
            return {}
        if pipelines is None:
            keys = ("WITH RECURSIVE keys(pipeline) AS (SELECT min(pipeline) FROM runs UNION ALL "
                    "SELECT (SELECT min(pipeline) FROM runs WHERE pipeline > keys.pipeline) FROM keys "
                    "WHERE keys.pipeline IS NOT NULL) ")
            params: list[Any] = [per_pipeline]
        else:
            keys = "WITH keys(pipeline) AS (SELECT DISTINCT value FROM json_each(?)) "
            params = [json.dumps(list(pipelines)), per_pipeline]
        sql = (keys + "SELECT r.pipeline, r.id, r.status, r.duration_ms, r.started_at, r.rows_written, r.warnings "
               "FROM keys k JOIN runs r ON r.rowid IN (SELECT rowid FROM runs WHERE pipeline = k.pipeline "
               f"AND status IN {RECENT_STATUSES} ORDER BY started_at DESC LIMIT ?) "
               "WHERE k.pipeline IS NOT NULL")
        out: dict[str, list[dict[str, Any]]] = {}
        with self._lock:
            for row in self.db.query(sql, params):
                out.setdefault(row["pipeline"], []).append(row)
        for rows in out.values():
            rows.sort(key=lambda r: r["started_at"] or "", reverse=True)
        return out

    def quality_results(self, limit: int = 200) -> list[dict[str, Any]]:
        sql = """select q.*, r.pipeline from quality_results q join runs r on r.id = q.run_id
                 order by q.id desc limit ?"""
        with self._lock:
            return [self._decode_quality(r) for r in self.db.query(sql, [limit])]

    # ----------------------------------------------------------------------------- the reaper's needs

    def runs_in(self, statuses: tuple[str, ...], *, oldest_first: bool = False) -> list[dict[str, Any]]:
        """Every run in one of `statuses` (e.g. the ones still going)."""
        marks = ",".join("?" * len(statuses))
        order = " order by coalesce(started_at, queued_at), id" if oldest_first else ""
        with self._lock:
            return list(self.db.query(f"select * from runs where status in ({marks}){order}", list(statuses)))

    def fail_if_running(self, run_id: str, error: Any, finished_at: str, duration_ms: int | None,
                        log_message: str) -> bool:
        """Fail a run that is still running (the reaper's timeout); False if it ended meanwhile."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                cur = self._conn.execute(
                    "UPDATE runs SET status = 'failed', finished_at = ?, duration_ms = ?, error_code = ?,"
                    " error_message = ?, error_hint = ? WHERE id = ? AND status = 'running'",
                    (finished_at, duration_ms, error.code, error.message, error.hint, run_id))
                if cur.rowcount == 1:
                    self._conn.execute("INSERT INTO run_logs (run_id, at, level, message) VALUES (?, ?, 'error', ?)",
                                       (run_id, finished_at, log_message))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return cur.rowcount == 1

    def beyond_newest(self, keep: int, before: str | None = None) -> tuple[list[dict[str, Any]], set[str]]:
        """Runs past the newest `keep` of their pipeline on their ref (oldest first per pipeline), and the ids of
        the newest successful run of each pipeline on each ref and of the newest run landed on each ref (change
        detection compares against them: never remove them), for the (pipeline, ref) groups this looks at.

        `before` (an ISO time): only runs that began before it are looked at (a run that ended before it began
        before it; the caller checks the end time exactly). Each group with such a run is ranked on its own, by
        index: the newest `keep` of the group skipped, the older ones read, so a pass over a history of a million
        runs of which few are old reads those few (the window over every run took 6 s there, every pass).
        Without `before`, every group."""
        with self._lock:
            if before is None:
                groups = self._conn.execute("SELECT DISTINCT pipeline, coalesce(ref, 'main') FROM runs").fetchall()
                began_before = None
            else:
                at = parse_time(before)
                began_before = iso(at + timedelta(days=1)) if at is not None else before  # a superset, by text
                groups = self._conn.execute(
                    "SELECT DISTINCT pipeline, coalesce(ref, 'main') FROM runs WHERE coalesce(started_at, queued_at) "
                    "< ?", (began_before,)).fetchall()
            rows: list[dict[str, Any]] = []
            last_success: set[str] = set()
            columns = ("id", "pipeline", "status", "started_at", "queued_at", "finished_at")
            for pipeline, ref in sorted(groups):
                group = "pipeline = ? AND coalesce(ref, 'main') = ?"
                edge = self._conn.execute(
                    f"SELECT coalesce(started_at, queued_at), id FROM runs WHERE {group} "
                    "ORDER BY coalesce(started_at, queued_at) DESC, id DESC LIMIT 1 OFFSET ?",
                    (pipeline, ref, max(0, keep - 1))).fetchone() if keep > 0 else None
                if keep > 0 and edge is None:
                    continue  # no more than `keep` runs
                older = " AND (coalesce(started_at, queued_at), id) < (?, ?)" if edge is not None else ""
                began = " AND coalesce(started_at, queued_at) < ?" if began_before is not None else ""
                rows.extend(dict(zip(columns, r)) for r in self._conn.execute(
                    f"SELECT {', '.join(columns)} FROM runs WHERE {group}{older}{began} "
                    "ORDER BY coalesce(started_at, queued_at), id",
                    (pipeline, ref, *(edge or ()), *([began_before] if began_before is not None else []))))
                newest = self._conn.execute(
                    f"SELECT id FROM runs WHERE {group} AND status = 'success' ORDER BY started_at DESC LIMIT 1",
                    (pipeline, ref)).fetchone()
                if newest is not None:
                    last_success.add(newest[0])
            # a branch's run that landed on another ref by a merge may be that ref's last success too
            pipelines = sorted({r["pipeline"] for r in rows})
            for start in range(0, len(pipelines), 500):
                chunk = pipelines[start:start + 500]
                last_success |= {r[0] for r in self._conn.execute(
                    f"""SELECT id FROM (SELECT r.id, row_number() OVER (PARTITION BY r.pipeline, l.ref
                                                                        ORDER BY l.at DESC) AS rn
                                       FROM landings l JOIN runs r ON r.id = l.run_id
                                       WHERE r.pipeline IN ({",".join("?" * len(chunk))})) WHERE rn = 1""", chunk)}
        return rows, last_success

    def delete_finished(self, run_ids: list[str]) -> set[str]:
        """Delete these runs with their logs, quality results and cancel requests, each only if it has ended
        (re-checked inside the transaction). Returns the ids deleted."""
        deleted: set[str] = set()
        final = ",".join("?" * len(FINAL))
        with self._lock:
            for start in range(0, len(run_ids), 500):
                chunk = run_ids[start:start + 500]
                marks = ",".join("?" * len(chunk))
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    gone = [r[0] for r in self._conn.execute(
                        f"SELECT id FROM runs WHERE id IN ({marks}) AND status IN ({final})", [*chunk, *FINAL])]
                    if gone:
                        gmarks = ",".join("?" * len(gone))
                        for child in ("quality_results", "run_logs", "cancel_requests", "landings"):
                            self._conn.execute(f"DELETE FROM {child} WHERE run_id IN ({gmarks})", gone)
                        self._conn.execute(f"DELETE FROM runs WHERE id IN ({gmarks})", gone)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                deleted.update(gone)
        return deleted

    def end_times(self, run_ids: set[str]) -> dict[str, float]:
        """When each run ended (or started, if it has not): POSIX seconds."""
        ids = sorted(run_ids)
        out: dict[str, float] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                for row in self.db.query(
                        f"SELECT id, finished_at, started_at FROM runs WHERE id IN ({','.join('?' * len(chunk))})",
                        chunk):
                    at = parse_time(row["finished_at"] or row["started_at"])
                    if at is not None:
                        out[row["id"]] = at.timestamp()
        return out
