"""`ratui alerts`: every alert attempt (sent, failed with why, suppressed with why), the channels ratui.yaml
declares, and a test message to one of them (docs/concepts/alerts.md)."""

from __future__ import annotations

import json

from ratui.cli.common import EXIT_FAILED, EXIT_OK, engine as _engine, positive_int, project_arg as _project_arg, table


def add_parsers(sub) -> None:
    p = sub.add_parser("alerts", help="alert attempts (sent, failed, suppressed), the channels, a test message")
    p.add_argument("action", nargs="?", choices=("list", "channels", "test"), default="list",
                   help="list (the default): the newest attempts; channels: the declared channels; test CHANNEL: "
                        "send a test alert")
    p.add_argument("channel", nargs="?", metavar="CHANNEL", help="the channel (test; list: only its attempts)")
    p.add_argument("--limit", type=positive_int, default=50, metavar="N", help="attempts listed (default 50)")
    _project_arg(p)
    p.add_argument("--json", action="store_true")


def cmd_alerts(args) -> int:
    engine = _engine(args.project, recover=False)
    if args.action == "channels":
        return _channels(engine, args.json)
    if args.action == "test":
        if not args.channel:
            from ratui.engine.errors import RatuiError

            raise RatuiError("RAT-ALR-004", "`ratui alerts test` needs the channel's name",
                             hint="`ratui alerts channels` lists them.")
        answer = engine.send_test_alert(args.channel)
        if args.json:
            print(json.dumps(answer))
        else:
            print(f"test alert to {answer['channel']} ({answer['target']}): {answer['outcome']}, {answer['detail']}")
        return EXIT_OK if answer["outcome"] == "sent" else EXIT_FAILED
    attempts = engine.alert_attempts(args.limit, args.channel)
    if args.json:
        for one in attempts:
            print(json.dumps(one, default=str))
        return EXIT_OK
    if not attempts:
        rules = len(engine.settings.alerts.rules)
        print("no alert attempts yet" + ("" if rules else " (ratui.yaml declares no alert rules: `alerts:`)"))
        return EXIT_OK
    print(table(["AT (UTC)", "CHANNEL", "EVENT", "OUTCOME", "TRIES", "PIPELINES", "TARGET", "DETAIL"], [
        [a["at"][:19], a["channel"], a["event"], a["outcome"], str(a["tries"]), _pipelines(a["pipelines"]),
         a["target"], a["detail"][:80]] for a in attempts]))
    return EXIT_OK


def _channels(engine, as_json: bool) -> int:
    rows = engine.alert_channels()
    if as_json:
        print(json.dumps({"channels": rows}))
        return EXIT_OK
    if not rows:
        print("no alert channels (ratui.yaml's `alerts: {channels: ..., rules: ...}`)")
        return EXIT_OK
    print(table(["CHANNEL", "KIND", "TARGET", "URL_ENV", "RULES", "MAX/HOUR"], [
        [r["channel"], r["kind"], r["target"], r["url_env"] or "-", ", ".join(r["rules"]) or "-",
         str(r["max_per_hour"])] for r in rows]))
    return EXIT_OK


def _pipelines(names: list[str]) -> str:
    if len(names) <= 2:
        return ", ".join(names) or "-"
    return f"{names[0]}, {names[1]} +{len(names) - 2}"


COMMANDS = {"alerts": cmd_alerts}
