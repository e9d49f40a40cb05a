"""The schedules' state (the one writer of its tables; tests/engine/test_record_owners.py):

    schedule_state   per schedule: paused (`ratui schedule pause NAME`), the last fire recorded, its invocation
    schedule_fires   every fire the runner decided, before it acted on it: run (its invocation), skipped (why)
    runner_lease     the one row saying which `ratui up` fires the project's schedules: pid, host, until when

A fire is recorded before it is run (`record_fires`, one transaction that also checks the lease is still ours and
that no one recorded that fire meanwhile): a runner killed after it recorded a fire and before its run started
never fires it again; the run it did not start is simply missing (and a run it started and that died is recovered
as dead by the run record's recovery). The lease is taken only when it is free or expired, in one transaction.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratui.engine.state import migrations
from ratui.engine.state.db import open_db, write_tx
from ratui.engine.vocabulary import now_iso


@dataclass(frozen=True)
class Lease:
    holder: str  # the runner's own id (a process may start several in tests: not its pid alone)
    pid: int
    host: str
    acquired_at: str
    renewed_at: str
    expires: float  # epoch seconds (the wall clock every runner of the project shares)

    def expired(self, now: float) -> bool:
        return self.expires <= now

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "acquired_at": self.acquired_at, "renewed_at": self.renewed_at,
                "expires_in_seconds": round(self.expires - time.time(), 1)}


@dataclass(frozen=True)
class FireRow:
    schedule: str
    fire_at: str  # the scheduled instant (UTC ISO) the fire stands for
    action: str  # run | skipped | dropped | paused
    reason: str
    invocation: str | None = None


class ScheduleState:
    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        migrations.migrate(self.db_path)
        with self._connect() as conn, write_tx(conn):
            for statement in migrations.SCHEDULE_TABLES:
                conn.execute(statement)

    def _connect(self) -> closing[sqlite3.Connection]:
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return closing(conn)

    # ----------------------------------------------------------------------------------------- reads

    def states(self) -> dict[str, dict[str, Any]]:
        with self._connect() as conn:
            return {row["name"]: dict(row) for row in conn.execute("SELECT * FROM schedule_state")}

    def fires(self, schedule: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The newest fires decided (of one schedule), newest first."""
        with self._connect() as conn:
            where, args = ("WHERE schedule = ?", [schedule]) if schedule else ("", [])
            return [dict(row) for row in conn.execute(
                f"SELECT * FROM schedule_fires {where} ORDER BY id DESC LIMIT ?", [*args, limit])]

    def lease(self) -> Lease | None:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM runner_lease WHERE id = 1").fetchone()
        return _lease(row)

    # ----------------------------------------------------------------------------------------- writes

    def set_paused(self, name: str, paused: bool) -> None:
        stamp = now_iso()
        with self._connect() as conn, write_tx(conn):
            conn.execute(
                "INSERT INTO schedule_state (name, paused, paused_at, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at, "
                "updated_at = excluded.updated_at", (name, int(paused), stamp if paused else None, stamp))

    def take_lease(self, holder: str, seconds: float, now: float | None = None) -> tuple[bool, Lease | None]:
        """Take or renew the lease for `holder`: only when it is ours, free or expired (one transaction). Returns
        (held, the lease as it is now)."""
        now = time.time() if now is None else now
        stamp = now_iso()
        with self._connect() as conn, write_tx(conn):
            current = _lease(conn.execute("SELECT * FROM runner_lease WHERE id = 1").fetchone())
            if current is not None and current.holder != holder and not current.expired(now):
                return False, current
            acquired = current.acquired_at if current is not None and current.holder == holder else stamp
            conn.execute(
                "INSERT OR REPLACE INTO runner_lease (id, holder, pid, host, acquired_at, renewed_at, expires) "
                "VALUES (1, ?, ?, ?, ?, ?, ?)", (holder, os.getpid(), socket.gethostname(), acquired, stamp,
                                                 now + seconds))
            row = conn.execute("SELECT * FROM runner_lease WHERE id = 1").fetchone()
        return True, _lease(row)

    def release_lease(self, holder: str) -> None:
        with self._connect() as conn, write_tx(conn):
            conn.execute("DELETE FROM runner_lease WHERE id = 1 AND holder = ?", (holder,))

    def baseline(self, name: str, last_fire: str) -> None:
        """A schedule seen for the first time: it starts from now (its past is not caught up)."""
        with self._connect() as conn, write_tx(conn):
            conn.execute("INSERT INTO schedule_state (name, paused, last_fire, updated_at) VALUES (?, 0, ?, ?) "
                         "ON CONFLICT(name) DO UPDATE SET last_fire = excluded.last_fire, updated_at = "
                         "excluded.updated_at WHERE schedule_state.last_fire IS NULL", (name, last_fire, now_iso()))

    def record_fires(self, holder: str, name: str, expected_last: str | None, new_last: str,
                     fires: list[FireRow], now: float | None = None) -> bool:
        """Record the fires of `name` decided from its last fire `expected_last`, and move its last fire to
        `new_last`, in one transaction, and only while `holder` holds an unexpired lease and the last fire is still
        `expected_last` (else nothing is written: another runner decided them). Returns whether they were."""
        now = time.time() if now is None else now
        stamp = now_iso()
        with self._connect() as conn, write_tx(conn):
            lease = _lease(conn.execute("SELECT * FROM runner_lease WHERE id = 1").fetchone())
            if lease is None or lease.holder != holder or lease.expired(now):
                return False
            row = conn.execute("SELECT last_fire FROM schedule_state WHERE name = ?", (name,)).fetchone()
            if (row["last_fire"] if row else None) != expected_last:
                return False
            invocation = next((f.invocation for f in reversed(fires) if f.invocation), None)
            conn.execute(
                "INSERT INTO schedule_state (name, paused, last_fire, last_invocation, updated_at) "
                "VALUES (?, 0, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET last_fire = excluded.last_fire, "
                "last_invocation = coalesce(excluded.last_invocation, schedule_state.last_invocation), "
                "updated_at = excluded.updated_at", (name, new_last, invocation, stamp))
            conn.executemany(
                "INSERT INTO schedule_fires (schedule, fire_at, decided_at, action, reason, invocation, pid, host) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(f.schedule, f.fire_at, stamp, f.action, f.reason, f.invocation, os.getpid(), socket.gethostname())
                 for f in fires])
        return True


def _lease(row: sqlite3.Row | None) -> Lease | None:
    if row is None:
        return None
    return Lease(row["holder"], row["pid"], row["host"], row["acquired_at"], row["renewed_at"], row["expires"])
