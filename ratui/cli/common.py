"""What the command line's modules share: exit codes, the project's engine, coded errors and plain tables."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import format_duration

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# `ratui check` lists each pipeline, and `ratui run` each unchanged one, up to this many; a larger project gets
# counts (a screenful of errors and failures is what a reader of 1,500 pipelines needs)
LIST_UP_TO = 100
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def project_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", "-p", default=".", metavar="DIR",
                   help="project folder (the one holding ratui.yaml; default: current directory)")


def door_args(p: argparse.ArgumentParser, *, port: int, clients: str, token_env: str, token_as: str = "",
              remote_note: str = "use TLS") -> None:
    """The options of a server's door, the same for `ratui web` and `ratui serve`: port, host (loopback unless
    --allow-remote), extra host names and the token."""
    p.add_argument("--port", type=int, default=port, metavar="N", help=f"port to listen on (default: {port})")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; any other needs "
                        "--allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help=f"allow a --host other machines can reach (the token is still needed; {remote_note})")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                   help=f"a host name {clients} may use besides 127.0.0.1, localhost and [::1] (repeatable; a "
                        "reverse proxy's name)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help=f"the token to require{token_as} (default: {token_env}, else a fresh one per launch); other "
                        f"users of this machine can see a command line, so prefer {token_env}")


def err(error: RatuiError, as_json: bool = False) -> None:
    if as_json:
        shown = error.to_dict()
        if error.public_details():  # e.g. the commits that refuse an undo, the tables of a conflict
            shown["details"] = error.public_details()
        print(json.dumps({"error": shown}, default=str))
    else:
        print(error.render(), file=sys.stderr)


def warm_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-warm", action="store_true",
                   help="run in this process, not in the project's warm engine (`ratui engine status`)")


# the warm engine's (ratui/warm/host.py): the project's Engine kept open between commands, else None (a command
# opens its own)
_KEPT_OPEN: list = []


def keep_engines_open(opener) -> None:
    _KEPT_OPEN[:] = [opener]


def served_command():
    """The warm engine's record of the command this thread runs (its signals: on_signal), or None in a process of
    its own."""
    from ratui.warm import stdio

    streams = stdio.current()
    return streams.owner if streams is not None else None


def engine(project: str, *, recover: bool = True):
    """The project's engine, after recording the runs whose process died (so that no command, a read included,
    shows a dead run as running: "recovery happens when any ratui process starts")."""
    from ratui.engine.facade.engine import Engine
    from ratui.engine.project.settings import find_project_root

    root = find_project_root(Path(project))
    engine = _KEPT_OPEN[0](root) if _KEPT_OPEN else Engine.open(root)
    if recover:
        engine.recover()
    return engine


def cell(value: Any) -> str:
    return "NULL" if value is None else str(value)


def table(columns: list[str], rows: list[list[str]]) -> str:
    widths = [len(c) for c in columns]
    for row in rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [line(columns), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


STATUS_TAG = {"success": "OK", "failed": "FAIL", "cancelled": "CANCEL", "skipped": "SKIP", "running": "RUN",
              "pending": "WAIT"}


def result_line(r: Any) -> str:
    tag = STATUS_TAG.get(r.status, r.status.upper())
    if r.status == "success" and r.warnings:
        tag = "WARN"
    if r.status == "skipped":
        return f"[{tag:<6}] {r.pipeline:<40} {r.strategy or '-':<13} {'':>14} {'':>8}  skip: {r.reason}"
    rows = f"{r.rows_written:,} rows"
    line = f"[{tag:<6}] {r.pipeline:<40} {r.strategy or '-':<13} {rows:>14} {format_duration(r.duration_ms):>8}"
    if r.run_type:
        line += f"  {r.run_type}: {r.reason}"
    if r.warnings:
        line += f"  ({r.warnings} quality warning(s))"
    if r.error:
        where = r.error.get("file")
        if where and r.error.get("line"):
            where += f":{r.error['line']}"
        line += f"\n         {r.error['code']} {r.error['message']}" + (f"\n         at {where}" if where else "")
    for note in r.notes or []:
        line += f"\n         note: {note}"
    return line
