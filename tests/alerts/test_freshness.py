"""Freshness: how old each table is on main since its pipeline's last successful run, against the pipeline's
`freshness` (a warning and an error bound). `ratui check --freshness` says it with an exit code for CI and cron
(1 when a table is past its error bound or was never built); the runner (`ratui up`) alerts `on: freshness` rules
once when a table goes stale, not on every loop, and again only after it was fresh in between."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.alerts.receivers import Webhook
from tests.conftest import TEST_SETTINGS
from tests.processes import stop_group
from tests.runner.test_up import Runner


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.3)
    return value


def test_check_freshness_and_the_runner_alerting_a_stale_table_once(tmp_path: Path, make_project):
    root = make_project({
        "demo/pipelines/gold/hourly/pipeline.sql": "-- @freshness: warn 6s, error 1h\nSELECT 1 AS x\n",
        "demo/pipelines/gold/daily/pipeline.sql": "-- @freshness: 1h\nSELECT 2 AS x\n",
        "demo/pipelines/gold/never/pipeline.sql": "-- @freshness: error 1h\nSELECT 3 AS x\n",
        "demo/pipelines/gold/free/pipeline.sql": "SELECT 4 AS x\n"})
    env = {**os.environ, "RATUI_WARM": "0"}

    def ratui(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(root)], env=env,
                              capture_output=True, text=True, timeout=300)

    def freshness() -> tuple[int, dict[str, dict]]:
        out = ratui("check", "--freshness", "--json")
        return out.returncode, {r["pipeline"]: r for r in json.loads(out.stdout)["freshness"]}

    assert ratui("run", "gold.hourly", "gold.daily", "gold.free").returncode == 0
    code, rows = freshness()
    assert set(rows) == {"demo.gold.hourly", "demo.gold.daily", "demo.gold.never"}  # free declares none
    assert code == 1 and rows["demo.gold.never"]["state"] == "error"  # never built on main
    assert rows["demo.gold.never"]["last_success"] is None and rows["demo.gold.never"]["age_seconds"] is None
    assert rows["demo.gold.daily"]["state"] == "fresh" and rows["demo.gold.daily"]["warn_after"] == "1h"
    assert rows["demo.gold.hourly"]["error_after"] == "1h" and rows["demo.gold.hourly"]["run_id"]
    wait_for(lambda: freshness()[1]["demo.gold.hourly"]["state"] == "warn", 60, "hourly past its warn_after (6 s)")
    human = ratui("check", "--freshness")
    assert human.returncode == 1 and "never on main" in human.stdout

    # the runner alerts each table that went stale once, however many loops it makes
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo") + "\n".join([
        "runner: {loop_seconds: 1}", "alerts:", "  gather_seconds: 0", "  channels:",
        "    hook: {url_env: HOOK_URL}", "  rules:",
        "    - {on: freshness, select: gold.hourly gold.never, notify: [hook]}", ""]))
    with Webhook() as hook:
        env["HOOK_URL"] = hook.url("/hook")
        runner = Runner(root, {**env, "RATUI_UP_TOKEN": "runner-test-token-0123456789"})
        try:
            runner.wait_for(lambda e: e.get("event") == "stale" and e["pipeline"] == "demo.gold.hourly")
            alerts = hook.wait_for("/hook", 2)
            assert {(a["pipeline"], a["state"]) for a in alerts} == {("demo.gold.hourly", "warn"),
                                                                   ("demo.gold.never", "error")}
            never = [a for a in alerts if a["pipeline"] == "demo.gold.never"][0]
            assert "never built on main" in never["title"] and never["see"]["command"].startswith(
                "ratui check --freshness")
            (first,) = [a for a in alerts if a["pipeline"] == "demo.gold.hourly"]
            assert ratui("run", "gold.hourly", "--force").returncode == 0  # fresh again, then stale again: again
            wait_for(lambda: len(hook.posts("/hook")) == 3, 90, "the second alert of hourly")
            again = hook.posts("/hook")[2]
            assert again["pipeline"] == "demo.gold.hourly" and again["run_id"] != first["run_id"]
        finally:
            stop_group(runner.proc)
        assert len(hook.posts("/hook")) == 3  # never alerted again while it stayed stale
    listed = [json.loads(line) for line in ratui("alerts", "--json").stdout.splitlines()]
    assert sorted((r["event"], r["outcome"]) for r in listed) == [("freshness", "sent")] * 3
