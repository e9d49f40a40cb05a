"""`ratui tui` and `ratui web`: the console in this terminal, or served to a browser behind a token."""

from __future__ import annotations

import json
from pathlib import Path

from ratui.cli.common import (
    EXIT_OK, door_args, non_negative_float as _non_negative_float, positive_int as _positive_int,
    project_arg as _project_arg,
)
from ratui.engine.errors import RatuiError


def add_parsers(sub) -> None:
    p = sub.add_parser("tui", help="open the console (the default command)")
    _project_arg(p)
    p.add_argument("--read-only", action="store_true",
                   help="look only: running, cancelling, merging, deleting, rolling back, landing resets, reaper "
                        "passes, exports and queries that write are refused")

    p = sub.add_parser("web", help="serve the console to a browser, behind a token (one console and one Spark per "
                                   "browser tab; Ctrl-C stops); `ratui web list` shows the running servers")
    p.add_argument("action", nargs="?", choices=("list",), metavar="list",
                   help="list this project's running servers (their URLs with the token) instead of serving")
    _project_arg(p)
    door_args(p, port=8000, clients="the browser", token_env="RATUI_WEB_TOKEN")
    p.add_argument("--certfile", metavar="FILE", help="serve HTTPS with this certificate (PEM; with --keyfile)")
    p.add_argument("--keyfile", metavar="FILE", help="the certificate's private key (PEM)")
    p.add_argument("--read-only", action="store_true",
                   help="every session's console is read-only: it looks, it never runs, merges or deletes")
    p.add_argument("--max-sessions", type=_positive_int, default=3, metavar="N",
                   help="browser tabs served at once (default: 3; each is a console with its own Spark)")
    p.add_argument("--idle-timeout", type=_non_negative_float, default=60.0, metavar="MINUTES",
                   help="close a session after this long without a key, click or resize (default: 60; 0: never)")
    p.add_argument("--json", action="store_true", help="one JSON object per server event (serving, stopped)")


def cmd_tui(args) -> int:
    from ratui.engine.project.settings import find_project_root

    root = find_project_root(Path(args.project))
    try:
        from ratui.app import run_app
    except ImportError as exc:  # the console is optional at import time only if Textual is missing
        raise RatuiError("RAT-RUN-002", f"the console cannot start: {exc}") from exc
    run_app(root, read_only=args.read_only)
    return EXIT_OK


def cmd_web(args) -> int:
    from ratui.engine.project.settings import find_project_root

    root = find_project_root(Path(args.project))  # not a project: the same RAT-PRJ-005 as `ratui tui`
    try:
        from ratui.web import WebOptions, serve
        from ratui.web import registry
    except ImportError as exc:  # textual-serve missing from this install
        raise RatuiError("RAT-RUN-002", f"ratui web cannot start: {exc}",
                         hint="Install ratui with its dependencies (textual-serve).") from exc
    if args.action == "list":
        servers = registry.running(root)
        if args.json:
            for info in servers:
                print(json.dumps({"url": info.url, "pid": info.pid, "project": info.project, "since": info.since,
                                  "read_only": info.read_only}), flush=True)
        elif not servers:
            print(f"no ratui web server is running for {root}")
        else:
            for info in servers:
                print(f"{info.url}  pid {info.pid}  since {info.since}" + ("  read-only" if info.read_only else ""))
        return EXIT_OK
    options = WebOptions(host=args.host, port=args.port, token=args.token, allow_hosts=args.allow_host,
                         allow_remote=args.allow_remote, certfile=args.certfile, keyfile=args.keyfile,
                         read_only=args.read_only, max_sessions=args.max_sessions, idle_minutes=args.idle_timeout)
    serve(root, options, as_json=args.json)
    return EXIT_OK


COMMANDS = {"tui": cmd_tui, "web": cmd_web}
