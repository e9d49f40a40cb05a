"""The runner's own alerts: a run going longer than a `stuck` rule's `after` alerts once (not on every loop), and a
schedule's fire skipped because its previous run is still going alerts a `missed` rule, to a real webhook on
127.0.0.1. The schedule clock is accelerated (RATUI_TEST_CLOCK, as tests/runner/test_up.py: a `* * * * *` schedule
fires every three seconds); the stuck bound is real time."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ratui.engine.project.scaffold import init_project
from tests.alerts.receivers import Webhook
from tests.processes import stop_group
from tests.runner.test_up import TOKEN, Runner

SLOW = ("-- @merge_strategy: full_refresh\n"
        "SELECT sum(a.id % 7 + b.id % 5) AS s FROM range(0, 400000) a CROSS JOIN range(0, 400000) b\n")


def test_a_stuck_run_alerts_once_and_a_skipped_fire_alerts_missed(tmp_path: Path):
    root = init_project(tmp_path / "p", None)
    (root / "ratui.yaml").write_text("\n".join([
        "namespace: p", "spark:", "  master: local[1]", "  config:", "    spark.sql.shuffle.partitions: 1",
        "runner: {lease_seconds: 4, loop_seconds: 1, grace_seconds: 2}",
        "schedules:", '  - {name: ticker, select: gold.slow, cron: "* * * * *"}',
        "alerts:", "  gather_seconds: 0", "  channels:", "    hook: {url_env: HOOK_URL}", "  rules:",
        "    - {on: stuck, after: 3s, notify: [hook]}", "    - {on: missed, notify: [hook]}", ""]))
    pipeline = root / "p" / "pipelines" / "gold" / "slow"
    pipeline.mkdir(parents=True)
    (pipeline / "pipeline.sql").write_text(SLOW)
    with Webhook() as hook:
        env = {**os.environ, "RATUI_TEST_CLOCK": f"{time.time():.0f}:20", "RATUI_UP_TOKEN": TOKEN,
               "RATUI_WARM": "0", "HOOK_URL": hook.url("/hook")}
        runner = Runner(root, env)
        try:
            started = runner.wait_for(lambda e: e["event"] == "started")
            skipped = runner.wait_for(lambda e: e["event"] == "fire" and e["action"] == "skipped")
            for kind in ("stuck", "missed"):
                deadline = time.monotonic() + 60
                while not [a for a in hook.posts("/hook") if a["event"] == kind]:
                    assert time.monotonic() < deadline, f"no {kind} alert: {hook.posts('/hook')}"
                    time.sleep(0.2)
            # a few more loops (and skipped fires) while the run is still going: stuck is not said again
            runner.wait_for(lambda e: e["event"] == "fire" and e["action"] == "skipped"
                            and e["fire_at"] > skipped["fire_at"])
            runner.proc.send_signal(signal.SIGTERM)
            assert runner.proc.wait(timeout=120) == 0
        finally:
            stop_group(runner.proc)
    posts = hook.posts("/hook")
    stuck = [a for a in posts if a["event"] == "stuck"]
    assert len(stuck) == 1, posts
    assert stuck[0]["pipeline"] == "p.gold.slow" and stuck[0]["status"] == "running"
    assert stuck[0]["see"]["cancel"].startswith(f"ratui cancel {stuck[0]['run_id']}")
    assert stuck[0]["age_seconds"] >= 3 and stuck[0]["after_seconds"] == 3  # past it (rounded to 0.1 s)
    missed = [a for a in posts if a["event"] == "missed"]
    assert missed and missed[0]["schedule"] == "ticker" and missed[0]["fires"][0]["action"] == "skipped"
    assert "previous run is still going" in missed[0]["title"]
    assert started["invocation"]
