"""The console's "Alerts" (the palette): the rules and channels ratui.yaml declares and the newest alert attempts
with their outcome and why, read on a worker from the state database that `ratui alerts` reads; a project with no
rules is told how to declare them. No JVM: the attempts are real ones (a test message to a channel whose variable
is not set, recorded as failed)."""

from __future__ import annotations

from ratui.engine.facade.engine import Engine

from .conftest import copy_sample, make_app, run, settle, wait_for


def _notice(root) -> str:
    app = make_app(root)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            app.action_alerts()
            await wait_for(pilot, lambda: any(n.startswith("Alerts:") for n in app.notices))
            return [n for n in app.notices if n.startswith("Alerts:")][-1]

    return run(go())


def test_the_alerts_notice_lists_the_newest_attempts_with_why(tmp_path, monkeypatch):
    monkeypatch.delenv("RATUI_TEST_OPS_HOOK", raising=False)
    root = copy_sample(tmp_path)
    with (root / "ratui.yaml").open("a") as fh:
        fh.write("alerts:\n  channels:\n    ops: {url_env: RATUI_TEST_OPS_HOOK}\n  rules:\n"
                 "    - {on: failure, notify: [ops]}\n")
    engine = Engine.open(root)
    assert engine.send_test_alert("ops")["outcome"] == "failed"  # the variable is not set: a failed attempt
    engine.close()
    notice = _notice(root)
    assert "1 rule(s), 1 channel(s)" in notice
    assert "ops test -: failed (RAT-ALR-005 the variable RATUI_TEST_OPS_HOOK is not set" in notice


def test_a_project_without_rules_is_told_how_to_declare_them(tmp_path):
    notice = _notice(copy_sample(tmp_path))
    assert "declares no alert rules" in notice and "docs/concepts/alerts.md" in notice
