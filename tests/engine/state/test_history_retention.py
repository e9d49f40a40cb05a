"""The reaper's run-history retention reads, per (pipeline, ref), the runs past the newest `keep` that began before
the cutoff, by index (a history of a million runs of which few are old costs those few). Checked against a plain
Python model on seeded random histories: refs and main, equal start times (the id breaks the tie), runs that never
started (their queue time counts), every status; and the newest successful run of each group is named."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from ratui.engine.state.history import History
from ratui.engine.vocabulary import iso, parse_time

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def seeded(tmp_path, seed: int) -> tuple[History, list[dict]]:
    rng = random.Random(seed)
    rows = []
    for i in range(rng.randint(0, 120)):
        at = iso(START + timedelta(hours=rng.randint(0, 200)))  # many ties
        status = rng.choice(["success", "success", "failed", "cancelled", "running", "pending"])
        started = None if status in ("pending", "cancelled") and rng.random() < 0.5 else at  # never started
        rows.append({"id": f"r{rng.randint(0, 10**9):09d}{i:04d}", "pipeline": f"ns.silver.p{rng.randint(0, 3)}",
                     "ref": rng.choice([None, None, "main", "dev"]), "trigger": "manual", "status": status,
                     "queued_at": at, "started_at": started, "finished_at": started and iso(
                         parse_time(started) + timedelta(minutes=rng.randint(0, 90))),
                     "duration_ms": 1, "rows_written": 0, "warnings": 0})
    history = History(tmp_path / f"h{seed}.db")
    if rows:
        history.db["runs"].insert_all(rows)
    return history, rows


def model(rows: list[dict], keep: int, before: str | None) -> tuple[set[str], dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["pipeline"], r["ref"] or "main"), []).append(r)
    beyond, newest_success = set(), {}
    loose = iso(parse_time(before) + timedelta(days=1)) if before else None
    for key, runs in groups.items():
        runs.sort(key=lambda r: (r["started_at"] or r["queued_at"], r["id"]), reverse=True)
        beyond |= {r["id"] for r in runs[keep:] if loose is None or (r["started_at"] or r["queued_at"]) < loose}
        successes = sorted((r for r in runs if r["status"] == "success"), key=lambda r: r["started_at"] or "",
                           reverse=True)
        if successes:
            newest_success[key] = successes[0]
    return beyond, newest_success


@pytest.mark.parametrize("seed", range(40))
def test_beyond_newest_is_the_model(tmp_path, seed):
    history, rows = seeded(tmp_path, seed)
    rng = random.Random(seed)
    try:
        for keep in (0, 1, 3, 10):
            before = rng.choice([None, iso(START + timedelta(hours=rng.randint(-30, 230)))])
            got, last_success = history.beyond_newest(keep, before=before)
            want, newest = model(rows, keep, before)
            assert {r["id"] for r in got} == want, (keep, before)
            assert len(got) == len(want)  # each once
            # a group that has runs to look at names its newest success (the reaper never removes it; of two
            # started at the same time, either)
            by_id = {r["id"]: r for r in rows}
            for r in got:
                group = (r["pipeline"], by_id[r["id"]]["ref"] or "main")
                success = newest.get(group)
                if success is not None:
                    named = [by_id[i] for i in last_success if i in by_id
                             and (by_id[i]["pipeline"], by_id[i]["ref"] or "main") == group]
                    assert [x["started_at"] for x in named] == [success["started_at"]], (group, named)
    finally:
        history.close()
