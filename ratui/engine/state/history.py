"""Run history in the project's SQLite database (sqlite-utils): the schema of the run tables (runs, quality
results, run logs, cancel requests, landings) and every read of them. Their rows are written by the run record
(run/record.py) alone, through `writer()`.

Reads page with keyset-friendly ORDER BY on indexed columns so a history of 100,000
runs lists as fast as one of ten.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

from ratui.engine.state import migrations
from ratui.engine.state.db import open_db, schema_lock, sqlite_utils
from ratui.engine.vocabulary import MAIN, iso, parse_time


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
    # the schedule that fired the run (trigger 'schedule'; ratui up, runner/)
    "schedule": str,
}


# the statuses of a finished run, as the console's tree reads them (recent_by_pipeline)
RECENT_STATUSES = "('success', 'failed', 'cancelled')"


class History:
    def __init__(self, db_path: Path):
        migrations.migrate(db_path)  # an older ratui's database: its missing columns first
        self._conn = open_db(db_path)
        self._lock = threading.RLock()
        self.db = sqlite_utils.Database(self._conn)
        with schema_lock(db_path):  # processes that open a fresh database at once take turns
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

    @contextmanager
    def writer(self) -> Iterator[Any]:
        """The database (sqlite-utils, on the history's one connection) under the lock every use of that connection
        takes. The run record (run/record.py) writes the run tables' rows through it; this module only reads."""
        with self._lock:
            yield self.db

    # -------------------------------------------------------------------------------------------- reads

    def cancel_requested(self, run_ids: list[str]) -> list[str]:
        """Those of `run_ids` another process asked to cancel."""
        if not run_ids:
            return []
        marks = ",".join("?" * len(run_ids))
        with self._lock:
            return [r["run_id"] for r in self.db.query(
                f"select run_id from cancel_requests where run_id in ({marks})", run_ids)]

    def unfinished_runs(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.db.query(
                "select id, pipeline, status, pid, pid_started, host, branch, started_at, queued_at, merged_at, ref, "
                "invocation "
                "from runs "
                "where status in ('pending', 'running')"))

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
        duration: the console's tree and sparklines; version, ref and error place: whether a failure is still the
        pipeline's state, and the line it points at).

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
        sql = (keys + "SELECT r.pipeline, r.id, r.status, r.duration_ms, r.started_at, r.rows_written, r.warnings, "
               "r.version, r.ref, r.error_code, r.error_file, r.error_line "
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
