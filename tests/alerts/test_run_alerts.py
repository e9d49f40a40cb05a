"""Alerts about runs, sent by the process that ran them (`ratui run` here, as a cron job or a CI step would): a
pipeline that fails, fails again and recovers alerts once on its failure and once on its recovery, to a plain
webhook, to Apprise's JSON scheme and to email over SMTP (real servers on 127.0.0.1), and to a command channel; a
run on a dev branch alerts no rule of main; a pipeline the rule does not select alerts nothing. The command that
ran the run has sent its alerts when it exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.alerts.receivers import Mailbox, Webhook
from tests.conftest import TEST_SETTINGS

SECRET = "hook-token-9f8e7d6c5b4a"
BROKEN = "-- @merge_strategy: full_refresh\nSELECT 1 / 0 AS x\n"  # ANSI SQL: a division by zero fails the run
FIXED = "-- @merge_strategy: full_refresh\nSELECT 1 AS x\n"


def test_fail_fail_recover_alerts_once_each_on_every_channel(tmp_path: Path, make_project):
    received = tmp_path / "received.jsonl"
    script = tmp_path / "keep.py"
    script.write_text(f"import sys\nopen({str(received)!r}, 'a').write(sys.stdin.read().replace('\\n', ' ') + "
                      "'\\n')\n")
    root = make_project({"demo/pipelines/gold/flaky/pipeline.sql": BROKEN,
                         "demo/pipelines/gold/other/pipeline.sql": BROKEN})
    (root / "ratui.yaml").write_text(TEST_SETTINGS.format(ns="demo") + "\n".join([
        "alerts:",
        "  gather_seconds: 0",
        "  channels:",
        "    hook: {url_env: HOOK_URL}",
        "    apprise: {url_env: APPRISE_URL}",
        "    mail: {url_env: MAIL_URL}",
        f"    keep: {{command: [{sys.executable}, {script}]}}",
        "  rules:",
        "    - {on: failure, select: gold.flaky, notify: [hook, apprise, mail, keep]}",
        "    - {on: recovery, select: gold.flaky, notify: [hook]}", ""]))
    flaky = root / "demo/pipelines/gold/flaky/pipeline.sql"
    with Webhook() as hook, Mailbox() as box:
        env = {**os.environ, "HOOK_URL": hook.url(f"/hook/{SECRET}"),
               "APPRISE_URL": f"json://127.0.0.1:{hook.port}/apprise", "MAIL_URL": box.url()}

        def ratui(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(root)], env=env,
                                  capture_output=True, text=True, timeout=300)

        assert ratui("check").returncode == 0
        first = ratui("run", "--json")
        assert first.returncode == 1
        # sent before `ratui run` exited: no waiting here
        (failed,) = hook.posts(f"/hook/{SECRET}")
        assert failed["event"] == "failure" and failed["pipeline"] == "demo.gold.flaky"
        run_id = failed["run_id"]
        assert failed["error"]["code"] and failed["ref"] == "main" and failed["trigger"] == "cli"
        assert failed["see"]["command"] == f"ratui show {run_id} --project {root}"
        assert ratui("show", run_id).returncode in (0, 1)  # the command it names shows that run
        assert run_id in ratui("show", run_id).stdout
        assert len(hook.posts("/apprise")) == 1 and "demo.gold.flaky failed" in hook.posts("/apprise")[0]["title"]
        (mail,) = box.wait_for(1)
        assert "demo.gold.flaky failed" in mail
        assert [json.loads(line)["run_id"] for line in received.read_text().splitlines()] == [run_id]

        assert ratui("run", "--force", "--json").returncode == 1  # fails again: no new alert
        assert ratui("run", "--ref", "dev", "--force").returncode == 1  # on a dev branch: not main's rule
        flaky.write_text(FIXED)
        assert ratui("run", "gold.flaky").returncode == 0  # recovers: one alert, to the recovery rule's channel
        (recovered,) = [p for p in hook.posts(f"/hook/{SECRET}") if p["event"] == "recovery"]
        assert recovered["pipeline"] == "demo.gold.flaky" and recovered["status"] == "success"
        assert ratui("run", "gold.flaky", "--force").returncode == 0  # still fine: nothing
        assert [p["event"] for p in hook.posts(f"/hook/{SECRET}")] == ["failure", "recovery"]
        # an atomic run works on a publish branch and lands on main at its end: main's rules are about it
        flaky.write_text(BROKEN)
        assert ratui("run", "gold.flaky", "--force", "--atomic").returncode == 1
        atomic = hook.posts(f"/hook/{SECRET}")[2]
        assert (atomic["event"], atomic["pipeline"], atomic["ref"]) == ("failure", "demo.gold.flaky", "main")
        assert len(hook.posts("/apprise")) == 2 and len(box.wait_for(2)) == 2
        assert len(received.read_text().splitlines()) == 2
        # gold.other failed every time and no rule selects it: never alerted
        assert all(p.get("pipeline") != "demo.gold.other" for _, p in hook.received)
        listed = ratui("alerts", "--json")
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted((r["channel"], r["event"], r["outcome"]) for r in records) == [
        ("apprise", "failure", "sent"), ("apprise", "failure", "sent"), ("hook", "failure", "sent"),
        ("hook", "failure", "sent"), ("hook", "recovery", "sent"), ("keep", "failure", "sent"),
        ("keep", "failure", "sent"), ("mail", "failure", "sent"), ("mail", "failure", "sent")]
    assert SECRET not in listed.stdout
