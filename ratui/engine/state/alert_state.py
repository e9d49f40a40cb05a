"""The alerts' state (the one writer of its tables; tests/engine/test_record_owners.py):

    alert_status    per rule and pipeline: the last state the rule saw (failing / ok / warned), since when, the run
    alert_attempts  every attempt to send an alert: sent, failed (why), suppressed (why); the channel's target as
                    its scheme and host only (a webhook's URL is a secret)

One alert per change of state: `change` moves a (rule, pipeline) to a new state in one transaction and says
whether this call moved it, so two processes that end runs of one pipeline at once never both alert.
"""

from __future__ import annotations

import json
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

SENT, FAILED, SUPPRESSED = "sent", "failed", "suppressed"
KEEP_ATTEMPTS = 10_000  # the newest attempts kept; older ones go as new ones are recorded


@dataclass(frozen=True)
class Attempt:
    channel: str
    rule: str
    event: str
    pipelines: tuple[str, ...]
    run_ids: tuple[str, ...]
    outcome: str  # sent | failed | suppressed
    detail: str
    target: str  # scheme://host, a command's program name: never a secret
    tries: int = 0


class AlertState:
    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        migrations.migrate(self.db_path)
        with self._connect() as conn, write_tx(conn):
            for statement in migrations.ALERT_TABLES:
                conn.execute(statement)

    def _connect(self) -> closing[sqlite3.Connection]:
        conn = open_db(self.db_path)
        conn.row_factory = sqlite3.Row
        return closing(conn)

    # ----------------------------------------------------------------------------------------- reads

    def attempts(self, limit: int = 100, channel: str | None = None) -> list[dict[str, Any]]:
        """The newest attempts, newest first."""
        where, args = ("WHERE channel = ?", [channel]) if channel else ("", [])
        with self._connect() as conn:
            rows = conn.execute(f"SELECT * FROM alert_attempts {where} ORDER BY id DESC LIMIT ?", [*args, limit])
            return [_attempt(row) for row in rows]

    def sent_since(self, channel: str, since_epoch: float) -> int:
        with self._connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM alert_attempts WHERE channel = ? AND outcome = ? AND "
                                    "at_epoch >= ?", (channel, SENT, since_epoch)).fetchone()[0])

    def status(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            return [dict(row) for row in conn.execute("SELECT * FROM alert_status ORDER BY rule, pipeline")]

    # ----------------------------------------------------------------------------------------- writes

    def change(self, rule: str, pipeline: str, state: str, run_id: str) -> str | None:
        """Move (rule, pipeline) to `state`; the state it had (None: never seen) when this call moved it, or
        `state` itself when it was already there (nothing to alert)."""
        with self._connect() as conn, write_tx(conn):
            row = conn.execute("SELECT state FROM alert_status WHERE rule = ? AND pipeline = ?",
                               (rule, pipeline)).fetchone()
            before = row["state"] if row is not None else None
            if before == state:
                return state
            conn.execute("INSERT OR REPLACE INTO alert_status (rule, pipeline, state, run_id, since) "
                         "VALUES (?, ?, ?, ?, ?)", (rule, pipeline, state, run_id, now_iso()))
        return before

    def record(self, attempt: Attempt) -> None:
        with self._connect() as conn, write_tx(conn):
            conn.execute(
                "INSERT INTO alert_attempts (at, at_epoch, channel, rule, event, pipelines, run_ids, outcome, detail, "
                "target, tries, pid, host) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (now_iso(), time.time(), attempt.channel, attempt.rule, attempt.event,
                 json.dumps(list(attempt.pipelines)), json.dumps(list(attempt.run_ids)), attempt.outcome,
                 attempt.detail[:1000], attempt.target, attempt.tries, os.getpid(), socket.gethostname()))
            conn.execute("DELETE FROM alert_attempts WHERE id <= (SELECT MAX(id) FROM alert_attempts) - ?",
                         (KEEP_ATTEMPTS,))


def _attempt(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out.pop("at_epoch", None)
    out["pipelines"] = json.loads(out["pipelines"])
    out["run_ids"] = json.loads(out["run_ids"])
    return out
