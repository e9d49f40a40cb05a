"""`ratui schedules`, `ratui schedule pause|resume NAME` and `ratui up`: the project's schedules, and the
long-running runner that fires them (ratui/runner/; docs/concepts/schedules.md)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.cli.common import (
    EXIT_OK, engine as _engine, non_negative_float, positive_int, project_arg as _project_arg, table,
)

TOKEN_ENV = "RATUI_UP_TOKEN"


def add_parsers(sub) -> None:
    p = sub.add_parser("schedules", help="list the schedules: cron, time zone, next and last fire, paused, lease")
    _project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("schedule", help="pause or resume a schedule (persisted; `ratui up` reads it before it fires)")
    p.add_argument("action", choices=("pause", "resume"))
    p.add_argument("name", metavar="NAME")
    _project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("up", help="the long-running runner: fire the project's schedules (one runner per project "
                                  "holds the lease; SIGTERM stops it)")
    _project_arg(p)
    p.add_argument("--health-port", type=int, default=None, metavar="N",
                   help="port of /healthz on 127.0.0.1 (default: runner.health_port, 8788; 0: none)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help=f"the token /healthz requires as `Authorization: Bearer TOKEN` (default: {TOKEN_ENV}, else a "
                        "fresh one, printed)")
    p.add_argument("--lease-seconds", type=positive_int, default=None, metavar="N",
                   help="the lease's length (default: runner.lease_seconds)")
    p.add_argument("--grace-seconds", type=non_negative_float, default=None, metavar="N",
                   help="on SIGTERM, how long runs in flight may go on before they are cancelled (default: "
                        "runner.grace_seconds)")
    p.add_argument("--watch", action="store_true",
                   help="also watch the project's files while holding the lease, and re-run what a saved file "
                        "affects on main (as `ratui watch`)")
    p.add_argument("--json", action="store_true", help="one JSON object per runner event")


def cmd_schedules(args) -> int:
    engine = _engine(args.project, recover=False)
    rows = engine.schedule_rows()
    for row in rows:
        row["recent_fires"] = engine.schedule_fires(row["name"], 5)
    if args.json:
        print(json.dumps({"schedules": rows}, default=str))
        return EXIT_OK
    if not rows:
        print("no schedules (ratui.yaml's `schedules:`, or a pipeline's `schedule`)")
        return EXIT_OK
    holder = rows[0]["lease_holder"]
    print(table(["NAME", "SELECT", "CRON", "TZ", "NEXT (UTC)", "NEXT (LOCAL)", "LAST FIRE", "STATE"], [
        [r["name"], r["select"], r["cron"], r["timezone"], (r["next_fire_utc"] or "-")[:16],
         (r["next_fire_local"] or "-")[:16], (r["last_fire"] or "-")[:16],
         "paused" if r["paused"] else ("disabled" if not r["enabled"] else "active")] for r in rows]))
    print(f"runner: pid {holder['pid']} on {holder['host']} holds the lease" if holder else
          "runner: none holds the lease (start one with `ratui up`)")
    return EXIT_OK


def cmd_schedule(args) -> int:
    engine = _engine(args.project, recover=False)
    engine.pause_schedule(args.name, args.action == "pause")
    word = "paused" if args.action == "pause" else "resumed"
    if args.json:
        print(json.dumps({"schedule": args.name, "paused": args.action == "pause"}))
    else:
        print(f"schedule {args.name} {word}")
    return EXIT_OK


def cmd_up(args) -> int:
    from ratui.runner.runner import Options, Runner

    engine = _engine(args.project, recover=True)
    settings = engine.settings
    lock = threading.Lock()

    def say(kind: str, fields: dict[str, Any]) -> None:
        with lock:
            if args.json:
                print(json.dumps({"event": kind, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), **fields},
                                 default=str), flush=True)
            else:
                where = f" {fields['schedule']}" if fields.get("schedule") else ""
                text = fields.get("message") or fields.get("reason") or ", ".join(
                    f"{k} {v}" for k, v in fields.items() if k != "schedule")
                print(f"{time.strftime('%H:%M:%S')} {kind}{where}: {text}", flush=True)

    options = Options(lease_seconds=args.lease_seconds or settings.runner_lease_seconds,
                      loop_seconds=settings.runner_loop_seconds,
                      grace_seconds=settings.runner_grace_seconds if args.grace_seconds is None else args.grace_seconds)
    watching = _Watching(engine, say) if args.watch else None
    runner = Runner(engine, options, say, on_lease=watching.held if watching else None)
    port = settings.runner_health_port if args.health_port is None else args.health_port
    if not 0 <= port <= 65535:
        raise RatuiError("RAT-SCH-006", f"--health-port {port} is out of range (1-65535, or 0 for no endpoint)")
    serving: list = []  # the shell's commands served here, once started
    # SIGTERM is the runner's from here on: anything that has read its output (its health line) may send it
    restore = _stop_on_signals(runner, serving)
    health, token_file = None, None
    try:
        if port:
            health, token_file = _start_health(args, port, engine, runner, say)
        engine.start_monitor()  # runs of other processes that die are recorded as failed while we run
        serving.append(_serve_the_shell(engine, say))
        runner.run()
    finally:
        restore()
        for one in serving:
            one.stop()  # the shell's commands served here are cancelled, as by their own Ctrl-C
            one.wait()
        if watching is not None:
            watching.held(False)
        if health is not None:
            health.stop()
        if token_file is not None:
            token_file.unlink(missing_ok=True)
        engine.close()
    return EXIT_OK


def _start_health(args, port: int, engine, runner, say) -> tuple[Any, Path | None]:
    """/healthz and /metrics on 127.0.0.1:port behind a token (given, or fresh and kept in a 0600 file: never
    printed). Returns the server and the fresh token's file (None when a token was given)."""
    from ratui.endpoint_access import checked_token, new_token
    from ratui.runner.health import HealthServer
    from ratui.runner.metrics import RunnerMetrics

    given = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    token = checked_token(given, "--token" if args.token else TOKEN_ENV, "RAT-SCH-006") if given else new_token()
    token_file = None if given else _keep_token(Path(engine.settings.db_path).parent / TOKEN_FILE, token)
    try:
        metrics = RunnerMetrics(engine, runner.status, freshness=lambda: engine.freshness(runner.compiled()))
        health = HealthServer(port, token, runner.status, metrics=metrics.exposition).start()
    except BaseException:  # a port in use: no token file left behind
        if token_file is not None:
            token_file.unlink(missing_ok=True)
        raise
    say("health", {"message": f"http://127.0.0.1:{health.port}/healthz (and /metrics)"
                              + ("" if given else f" (its token is in {token_file}, readable by you only)"),
                   "port": health.port})
    return health, token_file


TOKEN_FILE = "runner.token"  # a fresh /healthz token, in the project's state folder: never printed (a runner's
# output goes to a journal or a container's log, which others may read)


def _keep_token(path: Path, token: str) -> Path:
    """The token written to `path`, readable and writable by this user only (0600, whatever was there before)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return path


class _Watching:
    """`ratui up --watch`: the project's files watched (engine/watch, as `ratui watch`) while this runner holds the
    lease, so that two runners never both re-run a saved file."""

    def __init__(self, engine, say) -> None:
        self.engine, self.say, self.watcher = engine, say, None

    def held(self, held: bool) -> None:
        from ratui.engine import events as w
        from ratui.engine.watch.watcher import Watcher

        if held and self.watcher is None:
            def show(ev) -> None:
                if not isinstance(ev, w.WatchState):
                    fields = ev.to_dict()
                    self.say("watch", {"watch_event": fields.pop("event"), **fields})

            self.watcher = Watcher(engine=self.engine, on_event=show, ref="main")
            self.watcher.start()
        elif not held and self.watcher is not None:
            self.watcher.stop()
            self.watcher = None


def _serve_the_shell(engine, say) -> Any:
    """The shell's `ratui run`, `query`, ... on this project run in this runner, on its Spark, while it is up
    (ratui/warm/hosted.py): one JVM for the runner and the shell. Unless the warm engine is off (RATUI_WARM=0,
    engine.warm: false), or the engines' folder is refused: said once, and the shell's commands start their own."""
    from ratui.warm.hosted import ShellServing

    serving = ShellServing(engine.settings.root, lambda: engine, by="runner").start()
    if serving.problem:
        say("shell", {"message": f"the shell's commands are not served here: {serving.problem}"})
    else:
        say("shell", {"message": "the shell's `ratui run`, `backfill`, `query`, `diff`, `merge` and `watch` on this "
                                 "project run in this runner once no other engine of it does (`ratui engine status`)"})
    return serving


def _stop_on_signals(runner, serving: list) -> Any:
    """SIGTERM, SIGINT (Ctrl-C) and SIGHUP stop the runner (its runs in flight get the grace) and its serving of the
    shell, once started (the shell's commands served here are cancelled)."""
    import signal

    def stop(signum, frame):
        runner.stop()
        for one in serving:
            one.stop()

    previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    return restore


COMMANDS = {"schedules": cmd_schedules, "schedule": cmd_schedule, "up": cmd_up}
