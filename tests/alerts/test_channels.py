"""Alert channels and their faults, through the installed CLI (`ratui alerts test CHANNEL`, `ratui alerts --json`)
against real servers on 127.0.0.1 (tests/alerts/receivers.py), and the dispatcher's storm, digest and rate limit
on a real state database. No JVM: no run here (tests/alerts/test_run_alerts.py runs pipelines).

Every attempt is recorded with its outcome and why; the URL (a secret: a webhook's token is in its path) is never
printed, recorded or shown, only its scheme and host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ratui.engine.project.scaffold import init_project
from tests.alerts.receivers import Mailbox, Webhook

SECRET = "T0KEN-s3cr3t-abcdef123456"


def project(tmp_path: Path, channels: str, rules: str = "", more: str = "") -> Path:
    root = init_project(tmp_path / "p", None)
    (root / "ratui.yaml").write_text(f"namespace: p\nalerts:\n{more}  channels:\n{channels}\n"
                                     + (f"  rules:\n{rules}\n" if rules else ""))
    return root


def ratui(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(root)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def attempts(root: Path) -> list[dict]:
    out = ratui(root, "alerts", "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture()
def hook():
    with Webhook() as receiver:
        yield receiver


def test_a_test_alert_reaches_a_webhook_apprise_and_email_and_the_url_is_never_shown(tmp_path, hook):
    with Mailbox() as box:
        root = project(tmp_path, "    plain: {url_env: HOOK_URL}\n    json: {url_env: APPRISE_URL}\n"
                                 "    mail: {url_env: MAIL_URL}")
        env = {"HOOK_URL": hook.url(f"/hook/{SECRET}"), "APPRISE_URL": f"json://127.0.0.1:{hook.port}/apprise/{SECRET}",
               "MAIL_URL": box.url()}
        printed = ""
        for name in ("plain", "json", "mail"):
            out = ratui(root, "alerts", "test", name, env=env)
            assert out.returncode == 0, out.stdout + out.stderr
            assert "sent" in out.stdout
            printed += out.stdout + out.stderr
        (plain,) = hook.posts(f"/hook/{SECRET}")
        assert plain["event"] == "test" and plain["project"] == "p" and "title" in plain
        (apprised,) = hook.posts(f"/apprise/{SECRET}")  # Apprise's JSON scheme: its own shape, our title and text
        assert apprised["title"] == "ratui: a test alert to json" and "project p" in apprised["message"]
        (mail,) = box.wait_for(1)
        assert "ratui: a test alert to mail" in mail and "ops@example.com" in mail
        records = attempts(root)
    assert [r["outcome"] for r in records] == ["sent", "sent", "sent"]
    assert {r["target"] for r in records} == {f"http://127.0.0.1:{hook.port}", "json://…", "mailto://…"}
    shown = printed + json.dumps(records) + ratui(root, "alerts", env=env).stdout
    assert SECRET not in shown


def test_faults_are_failed_attempts_with_why_retried_only_when_worth_it(tmp_path, hook):
    script = tmp_path / "notify.py"
    script.write_text("import sys, json, time\nalert = json.load(sys.stdin)\n"
                      "if sys.argv[1] == 'hang':\n    time.sleep(60)\n"
                      "print('cannot page: no route', file=sys.stderr)\nsys.exit(1)\n")
    root = project(tmp_path, "\n".join([
        "    down: {url_env: DOWN_URL, retries: 2}",
        "    moved: {url_env: MOVED_URL, retries: 2}",
        "    slow: {url_env: SLOW_URL, retries: 0, timeout_seconds: 1}",
        f"    failing: {{command: [{sys.executable}, {script}, fail], retries: 1}}",
        f"    hanging: {{command: [{sys.executable}, {script}, hang], retries: 0, timeout_seconds: 1}}",
        "    unset: {url_env: RATUI_TEST_NOT_SET}",
        "    unknown: {url_env: ODD_URL, retries: 0}"]))
    env = {"DOWN_URL": hook.url(f"/fail?token={SECRET}"), "MOVED_URL": hook.url("/moved"),
           "SLOW_URL": hook.url("/slow"), "ODD_URL": f"nosuchscheme://{SECRET}/x"}
    for name in ("down", "moved", "slow", "failing", "hanging", "unset", "unknown"):
        out = ratui(root, "alerts", "test", name, env=env)
        assert out.returncode == 1, (name, out.stdout, out.stderr)
        assert "failed" in out.stdout and SECRET not in out.stdout + out.stderr
    by_channel = {r["channel"]: r for r in attempts(root)}
    assert by_channel["down"]["detail"] == "HTTP 500" and by_channel["down"]["outcome"] == "failed"
    assert "redirects are not followed" in by_channel["moved"]["detail"]
    assert "elsewhere.example" in by_channel["moved"]["detail"]
    assert len(hook.posts("/moved")) == 1  # a redirect is not retried: it is an answer, not a fault
    assert "no answer within 1 s" in by_channel["slow"]["detail"]
    assert by_channel["failing"]["detail"] == "exit code 1: cannot page: no route"
    assert "did not finish within 1 s" in by_channel["hanging"]["detail"]
    assert "RAT-ALR-005" in by_channel["unset"]["detail"] and "RATUI_TEST_NOT_SET" in by_channel["unset"]["detail"]
    assert "Apprise knows no such URL" in by_channel["unknown"]["detail"]
    assert SECRET not in json.dumps(list(by_channel.values()))
    # `ratui alerts test` sends once; a rule's alert is retried (the dispatcher's, below)
    assert len(hook.posts("/fail")) == 1


def test_a_storm_is_one_digest_the_rate_limit_suppresses_and_every_attempt_is_recorded(tmp_path, hook):
    """A real dispatcher on a real state database, the runs' outcomes given as the engine's events give them: 600
    pipelines failing within one gathering (more than it keeps: counted, not held) reach the webhook as one digest; a
    channel past its max_per_hour records the next as suppressed; a failing webhook is retried, then recorded."""
    from ratui.engine.alerts.dispatch import MAX_PENDING, Dispatcher
    from ratui.engine.alerts.message import RunOutcome
    from ratui.engine.project.settings import load_settings
    from ratui.engine.state.alert_state import AlertState

    root = project(tmp_path, "    ops: {url_env: OPS_URL, max_per_hour: 2}\n"
                             "    flaky: {url_env: FLAKY_URL, retries: 1}",
                   "    - {on: failure, notify: [ops]}\n    - {on: recovery, notify: [flaky]}",
                   # gathering outlasts the storm however slow this machine is: the flush below sends it
                   more="  gather_seconds: 120\n")
    settings = load_settings(root)
    state = AlertState(settings.db_path)
    env = {"OPS_URL": hook.url(f"/ops/{SECRET}"), "FLAKY_URL": hook.url("/fail")}
    dispatcher = Dispatcher(settings.alerts, state, lambda select: None, "p", root, env=env)
    for i in range(600):
        dispatcher.run_ended(RunOutcome(f"run-{i}", f"p.gold.t{i}", "failed", error_code="RAT-SQL-004",
                                        error_line="boom"))
    dispatcher.flush(60)
    (storm,) = hook.posts(f"/ops/{SECRET}")
    assert storm["event"] == "digest" and storm["count"] == 600 and len(storm["alerts"]) == 20
    assert "600 alerts at once" in storm["text"] and f"{600 - MAX_PENDING} more not listed" in storm["text"]
    # the same pipelines failing again: no new alert (one per change of state)
    for i in range(3):
        dispatcher.run_ended(RunOutcome(f"again-{i}", f"p.gold.t{i}", "failed"))
    dispatcher.flush(60)
    assert len(hook.posts(f"/ops/{SECRET}")) == 1
    # new failures one by one: the second is sent, the third is past max_per_hour (2): suppressed, said why
    for i in range(2):
        dispatcher.run_ended(RunOutcome(f"new-{i}", f"p.silver.n{i}", "failed"))
        dispatcher.flush(60)
    assert len(hook.posts(f"/ops/{SECRET}")) == 2
    # a recovery to a webhook that answers 500: tried twice (retries 1), then recorded failed
    dispatcher.run_ended(RunOutcome("ok-0", "p.gold.t0", "success"))
    dispatcher.flush(60)
    assert len(hook.posts("/fail")) == 2
    records = state.attempts(10)
    assert [(r["channel"], r["outcome"], r["tries"]) for r in records] == [
        ("flaky", "failed", 2), ("ops", "suppressed", 0), ("ops", "sent", 1), ("ops", "sent", 1)]
    assert "rate limit: 2 sent in the last hour" in records[1]["detail"]
    assert records[3]["pipelines"][:2] == ["p.gold.t0", "p.gold.t1"] and len(records[3]["pipelines"]) == 50
    assert SECRET not in json.dumps(records)
