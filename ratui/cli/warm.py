"""`ratui engine status | start | stop | logs`: the project's warm engine (ratui/warm/), the process that keeps
Spark between `ratui run`, `query`, `diff` and `merge`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ratui.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, positive_int, project_arg
from ratui.engine.errors import RatuiError

STOP_SECONDS = 60.0  # the runs in flight are cancelled first


def add_parsers(sub) -> None:
    p = sub.add_parser("engine", help="the project's warm engine: status, start, stop, logs")
    p.add_argument("action", choices=("status", "start", "stop", "logs"), nargs="?", default="status")
    project_arg(p)
    p.add_argument("--lines", "-n", type=positive_int, default=40, metavar="N", help="logs: the last N lines")
    p.add_argument("--json", action="store_true")


def cmd_engine(args) -> int:
    from ratui.warm import client, place as places

    root = _root(args.project)
    place = places.place_of(root)
    if args.action == "logs":
        return _logs(place.log, args.lines)
    if args.action == "start":
        pid, started = client.start(place)
        print(f"warm engine of {root}: {'started' if started else 'already running'} (pid {pid})")
        return EXIT_OK
    if args.action == "stop":
        answer = client.ask(place, {"stop": True})
        if answer is None:
            print(f"no warm engine runs for {root}")
            return EXIT_OK
        stopping = answer.get("stopping") or {}
        pid = stopping.get("pid")
        by = stopping.get("hosted_by")
        if by:  # a console (the runner) serving the shell stops serving and stays open (warm/hosted.py)
            print(f"the {_HOSTS.get(by, by)} (pid {pid}) no longer serves the shell's commands for {root}; it "
                  "goes on")
            return EXIT_OK
        if isinstance(pid, int) and not client.wait_until_gone(pid, STOP_SECONDS):
            err(RatuiError("RAT-ENG-003", f"the warm engine (pid {pid}) is still running {STOP_SECONDS:.0f} s after "
                           "it was asked to stop", file=str(place.log)), args.json)
            return EXIT_FAILED
        print(f"stopped the warm engine of {root} (pid {pid})")
        return EXIT_OK
    answer = client.ask(place, {"status": True})
    status = (answer or {}).get("status")
    if args.json:
        print(json.dumps({"project": str(root), "running": status is not None, "engine": status,
                          "socket": str(place.socket), "log": str(place.log)}, default=str))
        return EXIT_OK
    if status is None:
        print(f"no warm engine runs for {root} (the next `ratui run`, `backfill`, `query`, `diff`, `merge` or "
              "`watch` starts one)")
        return EXIT_OK
    print(_describe(status, place))
    return EXIT_OK


def _root(project: str) -> Path:
    from ratui.engine.project.settings import find_project_root

    return find_project_root(Path(project))


def _describe(status: dict, place) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(status.get("since") or 0))
    if status.get("hosted_by"):
        return _describe_hosted(status, place, since)
    rss, bound = status.get("rss_bytes"), status.get("max_memory_mb")
    memory = (f"{rss / 2**20:,.0f} MiB (the engine and Spark's JVM), renews itself past {bound:,} MiB"
              if rss and bound else "?")
    lines = [f"warm engine of {status.get('project')}",
             f"  pid        {status.get('pid')}, since {since}, ratui {status.get('version')}",
             f"  spark      {status.get('spark') or 'not started yet'}",
             f"  commands   {status.get('commands_served')} served, {len(status.get('running') or [])} running; "
             f"renews itself after {status.get('max_commands')}",
             f"  memory     {memory}",
             f"  stops      after {status.get('idle_minutes')} idle minute(s), or `ratui engine stop`",
             f"  socket     {place.socket}",
             f"  log        {place.log}"]
    for command in status.get("running") or []:
        lines.append(f"  running    ratui {' '.join(command.get('argv') or [])} (pid {command.get('pid')})")
    return "\n".join(lines)


_HOSTS = {"console": "console", "runner": "runner (`ratui up`)"}


def _describe_hosted(status: dict, place, since: str) -> str:
    rss = status.get("rss_bytes")
    by = str(status.get("hosted_by"))
    ends = "the console closes" if by == "console" else "the runner stops"
    lines = [f"the {_HOSTS.get(by, by)} serves the shell's commands for {status.get('project')}",
             f"  pid        {status.get('pid')} (the {by}'s), since {since}, ratui {status.get('version')}",
             f"  spark      {status.get('spark') or 'not started yet'} (the {by}'s own)",
             f"  commands   {status.get('commands_served')} served, {len(status.get('running') or [])} running",
             f"  memory     {f'{rss / 2**20:,.0f} MiB (the {by} and its JVM)' if rss else '?'}",
             f"  stops      when {ends}, or `ratui engine stop` (the {by} goes on)",
             f"  socket     {place.socket}",
             f"  log        {place.log}"]
    for command in status.get("running") or []:
        lines.append(f"  running    ratui {' '.join(command.get('argv') or [])} (pid {command.get('pid')})")
    return "\n".join(lines)


def _logs(log: Path, lines: int) -> int:
    from ratui.warm.logfile import recent_lines

    try:
        recent = recent_lines(log, lines)  # the older file's too: the log is rotated (ratui/warm/logfile.py)
    except OSError as exc:
        err(RatuiError("RAT-ENG-003", f"the warm engine's log cannot be read: {exc.strerror}", file=str(log)))
        return EXIT_USAGE
    if recent is None:
        print(f"no warm engine has run for this project yet ({log})")
        return EXIT_OK
    print("\n".join(recent))
    return EXIT_OK


COMMANDS = {"engine": cmd_engine}
