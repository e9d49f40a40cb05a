"""The `ratui` command line: the engine headless, for scripts, cron and CI.

Exit codes: 0 every selected run succeeded (warnings allowed); 1 a run failed or was cancelled; 2 a usage,
configuration or compile error, reported before any branch is created.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

from ratui import cli_branches
from ratui.engine.errors import ProjectErrors, RatuiError, is_usage_error
from ratui.engine.vocabulary import ACTIVE, RUN_STATUSES, format_bytes, format_duration

from ratui.cli_common import (  # noqa: F401 - shared with cli_branches.py
    EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_OK, EXIT_USAGE, cell as _cell, engine as _engine, err as _err,
    non_negative_float as _non_negative_float, positive_int as _positive_int, project_arg as _project_arg,
    table as _table,
)


class _Parser(argparse.ArgumentParser):
    """argparse with coded errors: `error[RAT-CLI-001] ...` (JSON with --json) and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        error = RatuiError("RAT-CLI-001", f"{self.prog}: {message}", hint=f"`{self.prog} --help` lists what it takes.")
        _err(error, "--json" in sys.argv[1:])
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ratui", description="A local lakehouse operations console.")
    from ratui import __version__

    parser.add_argument("--version", action="version", version=f"ratui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("tui", help="open the console (the default command)")
    _project_arg(p)
    p.add_argument("--read-only", action="store_true",
                   help="look only: running, cancelling, merging, deleting, rolling back, landing resets, reaper "
                        "passes, exports and queries that write are refused")

    p = sub.add_parser("run", help="run pipelines")
    p.add_argument("selectors", nargs="*", metavar="SELECTOR",
                   help="name, layer.name, namespace.layer.name, +x, x+, layer:silver, tag:daily (default: all)")
    _project_arg(p)
    p.add_argument("--full-refresh", action="store_true", help="rebuild the selected tables from scratch")
    p.add_argument("--force", action="store_true", help="run even the pipelines whose inputs did not change")
    p.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                   help="run up to N independent pipelines at once (default: run.threads in ratui.yaml, else 1)")
    p.add_argument("--ref", default="main", metavar="BRANCH",
                   help="run on a branch of yours: runs fork from it and merge into it (default: main)")
    p.add_argument("--atomic", action="store_true",
                   help="publish every selected pipeline in one commit, or none if any fails (main is never half "
                        "updated)")
    p.add_argument("--json", action="store_true", help="one JSON object per run")

    p = sub.add_parser("query", help="run a SQL query against the tables at a ref")
    p.add_argument("sql", metavar="SQL")
    _project_arg(p)
    p.add_argument("--ref", default="main", help="branch to read, or a past state REF@COMMIT (default: main)")
    p.add_argument("--at", metavar="TIME", help="read the ref as it was at this time (ISO, UTC unless it says)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--limit", type=_positive_int, default=1000, help="most rows to print (default: 1000)")

    p = sub.add_parser("runs", help="list run history, newest first")
    _project_arg(p)
    p.add_argument("--limit", type=_positive_int, default=20)
    p.add_argument("--pipeline", help="only runs of pipelines matching this text")
    p.add_argument("--ref", metavar="BRANCH", help="only runs on this branch (main, or a branch of yours)")
    p.add_argument("--status", choices=RUN_STATUSES)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("show", help="show one run: phases, quality results, log")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--sql", action="store_true", help="print only the exact SQL the run executed")
    _project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("branches", help="list branches (refs) of the catalog")
    _project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("landing", help="landing files and their load state; `landing reset ZONE [FILE]`, "
                                       "`landing forget ZONE FILE` (ZONE: namespace.zone, or zone alone when "
                                       "one namespace has it)")
    p.add_argument("args", nargs="*", metavar="ZONE | reset ZONE [FILE] | forget ZONE FILE")
    _project_arg(p)
    p.add_argument("--pipeline", help="only the ledger of this pipeline (table key or name)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("reap", help="clean up: stuck runs, orphan branches and files, old snapshots, history")
    _project_arg(p)
    p.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    p.add_argument("--json", action="store_true", help="print the stored report as one JSON object")

    p = sub.add_parser("cancel", help="cancel a run (in this or any other ratui process)")
    p.add_argument("run_id", metavar="RUN_ID")
    _project_arg(p)
    p.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                   help="wait this long for the run to end (default 10; 0 returns at once)")

    p = sub.add_parser("init", help="create a new project")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--namespace", default=None, help="namespace name (default: derived from DIR)")

    p = sub.add_parser("check", help="compile the project and report every problem (runs nothing)")
    _project_arg(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("watch", help="watch the project and re-run what each saved file affects (Ctrl-C stops)")
    p.add_argument("--ref", default="main", metavar="BRANCH", help="run on a branch of yours (default: main)")
    _project_arg(p)
    p.add_argument("--json", action="store_true", help="one JSON object per watch event")

    p = sub.add_parser("web", help="serve the console to a browser, behind a token (one console and one Spark per "
                                   "browser tab; Ctrl-C stops); `ratui web list` shows the running servers")
    p.add_argument("action", nargs="?", choices=("list",), metavar="list",
                   help="list this project's running servers (their URLs with the token) instead of serving")
    _project_arg(p)
    p.add_argument("--port", type=int, default=8000, metavar="N", help="port to listen on (default: 8000)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; any other needs "
                        "--allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a --host other machines can reach (the token is still needed; use TLS)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="a host name the browser may use besides 127.0.0.1, localhost and [::1] (repeatable; a "
                        "reverse proxy's name)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help="the token to require (default: RATUI_WEB_TOKEN, else a fresh one per launch); other users "
                        "of this machine can see a command line, so prefer RATUI_WEB_TOKEN")
    p.add_argument("--certfile", metavar="FILE", help="serve HTTPS with this certificate (PEM; with --keyfile)")
    p.add_argument("--keyfile", metavar="FILE", help="the certificate's private key (PEM)")
    p.add_argument("--read-only", action="store_true",
                   help="every session's console is read-only: it looks, it never runs, merges or deletes")
    p.add_argument("--max-sessions", type=_positive_int, default=3, metavar="N",
                   help="browser tabs served at once (default: 3; each is a console with its own Spark)")
    p.add_argument("--idle-timeout", type=_non_negative_float, default=60.0, metavar="MINUTES",
                   help="close a session after this long without a key, click or resize (default: 60; 0: never)")
    p.add_argument("--json", action="store_true", help="one JSON object per server event (serving, stopped)")
    cli_branches.add_parsers(sub)
    return parser


STATUS_TAG = {"success": "OK", "failed": "FAIL", "cancelled": "CANCEL", "skipped": "SKIP", "running": "RUN",
              "pending": "WAIT"}


def _result_line(r: Any) -> str:
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


def cmd_run(args) -> int:
    """No selector means the whole project: any compile error stops everything before a branch exists. With
    selectors, a broken pipeline outside the selection is only a warning."""
    engine = _engine(args.project, recover=True)
    compiled = engine.compile()
    try:
        keys = compiled.select(args.selectors)
    except RatuiError as exc:
        _err(exc, args.json)
        return EXIT_USAGE
    problems = compiled.all_errors()
    blocking = problems if not args.selectors else [e for k in keys for e in compiled.pipelines[k].errors]
    if blocking:
        for e in blocking:
            _err(e, args.json)
        summary = RatuiError("RAT-RUN-008", f"{len(blocking)} problem(s) in "
                             + ("the project" if not args.selectors else "the selected pipelines")
                             + ": nothing was run")
        if not args.json:
            _err(summary)
        return EXIT_USAGE
    for e in problems:
        print(f"warning: not selected, but broken: {e}", file=sys.stderr)

    def show(result) -> None:
        if args.json:
            print(json.dumps(result.to_dict(), default=str), flush=True)
        else:
            print(_result_line(result), flush=True)

    engine.expect_one_shot(keys, compiled, force=args.force, full_refresh=args.full_refresh, ref=args.ref)
    invocation = engine.invocation(keys, trigger="cli", full_refresh=args.full_refresh, force=args.force,
                                   on_result=show, threads=args.threads, ref=args.ref, atomic=args.atomic)
    ignored = engine.settings.spark_remote_ignored
    if ignored:  # the file wins over the shell, and the user hears of it
        spark = engine.settings.spark_remote or engine.settings.spark_master
        if args.json:
            print(json.dumps({"event": "spark", "spark": spark, "spark_remote_ignored": ignored}), flush=True)
        else:
            print(f"note: SPARK_REMOTE ({ignored}) is ignored: ratui.yaml names Spark ({spark})", file=sys.stderr,
                  flush=True)
    if not args.json:
        where = f" on {args.ref}" if args.ref != "main" else ""
        if args.atomic:
            where += f", atomically through {invocation.ref}"
        print(f"Running {len(keys)} pipeline(s) in {engine.root}{where}", flush=True)

    began = time.monotonic()
    stopped_by = _stop_on_signals(invocation, args.json)
    try:
        results = invocation.run()
    finally:
        _restore_signals(stopped_by)
    wall_ms = int((time.monotonic() - began) * 1000)
    publish = invocation.publish
    if publish is not None:
        if args.json:
            print(json.dumps(publish.to_dict(), default=str), flush=True)
        else:
            print(f"\n{'published' if publish.merged else 'NOT published'}: {publish.reason}"
                  + (f" (commit {publish.commit[:12]})" if publish.commit else ""))
    ok = sum(1 for r in results if r.status == "success")
    unchanged = sum(1 for r in results if r.status == "skipped" and r.run_type == "skip" and not r.error)
    if not args.json:
        warned = sum(1 for r in results if r.status == "success" and r.warnings)
        print(f"\n{ok} succeeded ({warned} with warnings), {unchanged} unchanged (skipped), "
              f"{len(results) - ok - unchanged} not succeeded, in {format_duration(wall_ms)}")
    if stopped_by["signal"]:  # stopped from outside: the runs in flight were cancelled, main is unchanged
        return 128 + stopped_by["signal"]
    if publish is not None and not publish.merged:
        return EXIT_FAILED
    return EXIT_OK if ok + unchanged == len(results) else EXIT_FAILED


STOP_SECONDS = 30.0  # after Ctrl-C, SIGTERM or SIGHUP, the runs in flight get this long to end as cancelled
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _stop_on_signals(invocation, as_json: bool) -> dict:
    """Ctrl-C, `kill` (SIGTERM) and a closed terminal (SIGHUP) stop a `ratui run` the same way: the runs in flight
    are cancelled (their branches deleted, main unchanged, each recorded as cancelled), nothing new starts, and the
    command exits 128+signal. A second signal, or runs still going after STOP_SECONDS (Python code that never
    reaches a checkpoint), stop the process at once; recovery then records what was left."""
    import os
    import signal
    import threading

    state: dict = {"signal": 0, "previous": {}}

    def say(text: str) -> None:
        try:
            print(f"ratui: {text}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # SIGHUP: the terminal may be gone
            pass

    def watchdog(signum: int) -> None:
        invocation.cancel()
        if not invocation.wait(STOP_SECONDS):
            say(f"runs still going {STOP_SECONDS:.0f} s after the stop: exiting; the next ratui records them")
            os._exit(128 + signum)

    def stop(signum, frame) -> None:
        if state["signal"]:
            raise KeyboardInterrupt  # a second signal: stop now
        state["signal"] = signum
        name = signal.Signals(signum).name
        if not as_json or signum != signal.SIGHUP:
            say(f"{name}: cancelling the runs in flight (main stays as it is); again to stop at once")
        threading.Thread(target=watchdog, args=(signum,), name="ratui-stop", daemon=True).start()

    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            try:
                state["previous"][number] = signal.signal(number, stop)
            except (ValueError, OSError):  # not the main thread: nothing to install
                pass
    return state


def _restore_signals(state: dict) -> None:
    import signal

    for number, handler in state["previous"].items():
        try:
            signal.signal(number, handler)
        except (ValueError, OSError, TypeError):
            pass


def cmd_query(args) -> int:
    engine = _engine(args.project)
    ref = engine.resolve_ref(args.ref, args.at)
    if args.at and args.format == "table":
        print(f"-- {args.ref} at {args.at}: {ref}", file=sys.stderr)
    engine.expect_one_shot_query()
    columns, rows, truncated = engine.query(args.sql, ref=ref, limit=args.limit)
    if args.format == "json":
        for row in rows:
            print(json.dumps(dict(zip(columns, row)), default=str))
    elif args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        print(_table(columns, [[_cell(v) for v in row] for row in rows]))
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''}{', truncated' if truncated else ''})")
    return EXIT_OK


def cmd_runs(args) -> int:
    engine = _engine(args.project)
    runs = engine.runs(args.limit, pipeline=args.pipeline, status=args.status, ref=args.ref)
    if args.json:
        for run in runs:
            print(json.dumps(run, default=str))
        return EXIT_OK
    rows = [[r["id"], r["pipeline"], r["status"] + (" (warn)" if r.get("warnings") else ""), r.get("strategy") or "-",
             r.get("run_type") or "-", f"{r.get('rows_written') or 0:,}", format_duration(r.get("duration_ms")),
             (r.get("started_at") or "")[:19], r.get("error_code") or (r.get("reason") or "")[:40]] for r in runs]
    print(_table(["RUN", "PIPELINE", "STATUS", "STRATEGY", "TYPE", "ROWS", "TIME", "STARTED", "ERROR / REASON"],
                 rows))
    return EXIT_OK


def cmd_show(args) -> int:
    engine = _engine(args.project)
    run = engine.get_run(args.run_id)
    if run is None:
        _err(RatuiError("RAT-RUN-004", f"no run '{args.run_id}'"), args.json)
        return EXIT_USAGE
    if args.sql:
        sql = next((e["message"].split("\n", 1)[1] for e in run["logs"]
                    if e["message"].startswith("compiled SQL:\n")), None)
        if sql is None:
            _err(RatuiError("RAT-RUN-004", f"run {run['id']} has no compiled SQL",
                            hint="Python pipelines and runs that stopped before their build phase have none."),
                 args.json)
            return EXIT_FAILED
        print(json.dumps({"run": run["id"], "version": run.get("version"), "sql": sql}) if args.json else sql)
        return EXIT_OK
    if args.json:
        print(json.dumps(run, default=str))
        return EXIT_OK
    print(f"run {run['id']}  {run['pipeline']}  {run['status']}")
    print(f"  strategy {run.get('strategy') or '-'}, trigger {run['trigger']}, branch {run.get('branch') or '-'}"
          f", merges into {run.get('ref') or 'main'}" + (f", version {run['version']}" if run.get("version") else ""))
    if run.get("run_type"):
        print(f"  run type {run['run_type']}: {run.get('reason')}")
    print(f"  started {run.get('started_at')}, finished {run.get('finished_at')}, "
          f"took {format_duration(run.get('duration_ms'))}")
    print(f"  rows written {run.get('rows_written') or 0:,}")
    if run.get("error_code"):
        where = f" ({run['error_file']}{':' + str(run['error_line']) if run.get('error_line') else ''})" \
            if run.get("error_file") else ""
        print(f"  error {run['error_code']}: {run['error_message']}{where}\n  hint: {run.get('error_hint')}")
    for note in run.get("notes") or []:
        print(f"  note: {note}")
    phases = run.get("phases") or {}
    if phases:
        total = max(sum(phases.values()), 1)
        print("phases:")
        for name, ms in phases.items():
            bar = "#" * max(1, round(30 * ms / total))
            print(f"  {name:<8} {format_duration(ms):>8}  {bar}")
    if run["quality"]:
        print("quality:")
        for q in run["quality"]:
            print(f"  {q['status']:<7} {q['test']} [{q['severity']}] {q['violations']} violation(s)"
                  + (f" - {q['error']}" if q.get("error") else ""))
            for row in q["sample"]:
                print(f"           {dict(zip(q['columns'], row))}")
    if run["logs"]:
        print("log:")
        for entry in run["logs"]:
            if entry["level"] != "debug":
                print(f"  {entry['at'][11:23]} {entry['level']:<7} {entry['message']}")
    return EXIT_OK


def cmd_check(args) -> int:
    from ratui.engine.project.compiler import compile_project
    from ratui.engine.project.settings import find_project_root

    compiled = compile_project(find_project_root(Path(args.project)))
    errors = compiled.all_errors()
    if args.json:
        print(json.dumps({"pipelines": len(compiled.pipelines), "errors": [e.to_dict() for e in errors]}))
    else:
        for e in errors:
            _err(e)
        print(f"{len(compiled.pipelines)} pipeline(s), {len(errors)} problem(s)")
        for key in compiled.graph.order():
            p = compiled.pipelines[key]
            ups = ", ".join(p.refs) or "-"
            print(f"  {key:<40} {p.config.merge_strategy if p.config else '?':<13} <- {ups}")
    return EXIT_USAGE if errors else EXIT_OK


def cmd_landing(args) -> int:
    engine = _engine(args.project)
    words = list(args.args)
    pipeline = args.pipeline
    if pipeline and pipeline.count(".") < 2:
        pipeline = engine.compile().resolve(pipeline).key
    if words and words[0] == "forget":
        if len(words) != 3:
            raise RatuiError("RAT-CLI-001", "usage: ratui landing forget ZONE FILE",
                             hint="Name the zone and the file whose ledger rows to drop.")
        changed = engine.landing_forget(words[1], words[2], pipeline)
        if changed == 0:
            raise RatuiError("RAT-LND-001", f"no ledger entry for zone '{words[1]}' file '{words[2]}'",
                             hint="`ratui landing` lists the files the ledger knows.")
        print(json.dumps({"forgotten": changed}) if args.json else
              f"{changed} ledger entr{'y' if changed == 1 else 'ies'} dropped: a rebuild goes on without the file")
        return EXIT_OK
    if words and words[0] == "reset":
        if len(words) not in (2, 3):
            raise RatuiError("RAT-CLI-001", "usage: ratui landing reset ZONE [FILE]", hint="Name the zone to reset.")
        zone, file = words[1], words[2] if len(words) == 3 else None
        changed = engine.landing_reset(zone, file, pipeline)
        if changed == 0:
            raise RatuiError("RAT-LND-001", f"no ledger entry for zone '{zone}'" + (f" file '{file}'" if file else ""),
                             hint="`ratui landing` lists the files the ledger knows.")
        print(json.dumps({"reset": changed}) if args.json else f"{changed} ledger entr{'y' if changed == 1 else 'ies'} "
              "made loadable again")
        return EXIT_OK
    zone = words[0] if words else None
    if words[1:]:
        raise RatuiError("RAT-CLI-001", f"ratui landing takes one zone, got {len(words)} words",
                         hint="`ratui landing [ZONE]`, `ratui landing reset ZONE [FILE]`, "
                              "`ratui landing forget ZONE FILE` (ZONE: namespace.zone, or zone alone).")
    files = engine.landing_files(zone, pipeline)
    if args.json:
        for f in files:
            print(json.dumps(f.to_dict()))
        return EXIT_OK
    rows = [[f"{f.namespace}.{f.zone}", f.file, f.pipeline, f.state, f"{f.size:,}", str(f.attempts), f.run_id or "",
             (f.last_error or "")[:40]] for f in files]
    print(_table(["ZONE", "FILE", "PIPELINE", "STATE", "BYTES", "TRIES", "LOADED BY", "LAST ERROR"], rows))
    return EXIT_OK


def cmd_cancel(args) -> int:
    """Writes the request to the database (the running process honours it); no Spark or catalog is loaded."""
    import time

    engine = _engine(args.project)
    run = engine.get_run(args.run_id)
    if run is None:
        raise RatuiError("RAT-RUN-004", f"no run '{args.run_id}'")
    if engine.cancel(run["id"]) == "finished":
        run = engine.get_run(run["id"])
        print(f"run {run['id']} had already finished: {run['status']}")
        return EXIT_FAILED
    print(f"cancel requested for run {run['id']} ({run['pipeline']})", flush=True)
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        run = engine.get_run(run["id"])
        if run["status"] not in ACTIVE:
            print(f"run {run['id']} ended: {run['status']}")
            return EXIT_OK if run["status"] == "cancelled" else EXIT_FAILED
        time.sleep(0.2)
    if args.wait:
        print(f"run {run['id']} is still {run['status']}: it stops at its next checkpoint")
    return EXIT_OK


def cmd_reap(args) -> int:
    engine = _engine(args.project, recover=True)
    report = engine.reap(dry_run=args.dry_run)
    if args.json:
        print(json.dumps(report.to_dict(), default=str))
        return EXIT_OK if report.ok else EXIT_FAILED
    shown = 10

    def detail(task: str, item: dict) -> str:
        if task == "stuck_runs":
            return (f"{item['pipeline']} running for {item['minutes']:.0f} min (pid {item['pid']} on {item['host']})"
                    + (f", this process: cancel {item.get('cancel', 'not sent (dry run)')}"
                       if item.get("this_process") else ""))
        if task == "orphan_branches":
            return f"created {(item.get('created_at') or '?')[:19]}, " + (
                f"run {item['run_id']}" if item.get("run_id") else "an atomic publish that did not land")
        if task == "run_history":
            return f"{item['pipeline']} {item['status']}, finished {(item.get('finished_at') or '?')[:19]}"
        if task == "snapshots":
            return f"taken {item['timestamp'][:19]}"
        return format_bytes(item.get("bytes", 0))

    print(f"reaper pass {report.id}" + (" (dry run: nothing removed)" if report.dry_run else "")
          + f" in {engine.root}")
    for name, task in report.tasks.items():
        verb = task.verb if not report.dry_run else "to be " + task.verb
        count = len(task.found) if report.dry_run else len(task.removed)
        size = task.bytes_found if report.dry_run else task.bytes_freed
        line = f"  {task.title:<24} {len(task.found):>5} found, {count:>5} {verb}"
        if size:
            line += f", {format_bytes(size)}"
        if task.kept:
            line += f" ({len(task.kept)} kept)"
        print(line + f"  [{format_duration(task.duration_ms)}]")
        for item in task.found[:shown]:
            print(f"      {item['name']}  {detail(name, item)}")
        if len(task.found) > shown:
            print(f"      ... and {len(task.found) - shown} more (--json lists all)")
        for item in task.kept[:shown]:
            print(f"      kept {item['name']}: {item.get('reason', '')}")
        if task.error:
            print(f"      error[{task.error['code']}] {task.error['message']}")
    if report.dry_run:
        print(f"\n{report.found} item(s) would be removed, {format_bytes(report.bytes_found)} would be freed")
    else:
        print(f"\n{report.removed} item(s) removed, {format_bytes(report.bytes_freed)} freed")
    for name, error in report.errors:
        print(f"error[{error['code']}] {name}: {error['message']}", file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_init(args) -> int:
    from ratui.engine.project.scaffold import init_project

    path = init_project(Path(args.dir), args.namespace)
    print(f"created project in {path}\nnext: ratui run --project {args.dir}")
    return EXIT_OK


def cmd_tui(args) -> int:
    from ratui.engine.project.settings import find_project_root

    root = find_project_root(Path(args.project))
    try:
        from ratui.app import run_app
    except ImportError as exc:  # the console is optional at import time only if Textual is missing
        raise RatuiError("RAT-RUN-002", f"the console cannot start: {exc}") from exc
    run_app(root, read_only=args.read_only)
    return EXIT_OK


def cmd_watch(args) -> int:
    import signal
    import threading
    import time

    from ratui.engine import events as w
    from ratui.engine.ops.watch import Watcher

    engine = _engine(args.project, recover=True)
    lock = threading.Lock()  # events come from two threads: keep lines whole

    def show(ev) -> None:
        with lock:
            if args.json:
                if not isinstance(ev, w.WatchState):
                    print(json.dumps(ev.to_dict(), default=str), flush=True)
                return
            stamp = time.strftime("%H:%M:%S")
            if isinstance(ev, w.WatchStarted):
                print(f"watching {ev.root} (debounce {ev.debounce_ms} ms); Ctrl-C stops", flush=True)
            elif isinstance(ev, w.WatchReloaded):
                print(f"{stamp} reloaded ratui.yaml (debounce {ev.debounce_ms} ms)", flush=True)
                for note in ev.notes:
                    print(f"         note: {note}", flush=True)
            elif isinstance(ev, w.WatchErrors):
                print(f"{stamp} {', '.join(ev.changed) or 'change'}: {len(ev.errors)} problem(s)"
                      + (f", not running {', '.join(ev.blocked)}" if ev.blocked else "")
                      + "; waiting for the next save", flush=True)
                for e in ev.errors:
                    _err(e)
            elif isinstance(ev, w.WatchPlanStarted):
                print(f"{stamp} {', '.join(ev.changed)} -> running {', '.join(ev.keys)}", flush=True)
            elif isinstance(ev, w.WatchRunResult):
                print(_result_line(ev.result), flush=True)
            elif isinstance(ev, w.WatchPlanFinished):
                ok = sum(1 for r in ev.results if getattr(r, "status", None) == "success")
                print(f"{stamp} {ok} succeeded, {len(ev.results) - ok} not succeeded, "
                      f"in {format_duration(ev.duration_ms)}"
                      + ("" if ev.error else "; watching"), flush=True)
            elif isinstance(ev, w.WatchFailed):
                print(f"{stamp} error: {ev.message}", file=sys.stderr, flush=True)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # `kill` stops as cleanly as Ctrl-C: in-flight runs are cancelled
    signal.signal(signal.SIGHUP, interrupt)  # and so does the terminal closing
    engine.start_monitor()  # runs of other processes that die are recorded as failed while we watch
    from ratui.engine.ops.branches import check_writable

    check_writable(engine.state, args.ref)  # a mistyped branch fails now, not at the first save
    watcher = Watcher(engine=engine, on_event=show, ref=args.ref)
    watcher.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        if not args.json:
            print("stopping", flush=True)
    finally:
        watcher.stop()
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


COMMANDS = {"run": cmd_run, "query": cmd_query, "runs": cmd_runs, "show": cmd_show,
            "init": cmd_init, "landing": cmd_landing, "cancel": cmd_cancel, "check": cmd_check, "tui": cmd_tui,
            "watch": cmd_watch, "reap": cmd_reap, "web": cmd_web, **cli_branches.COMMANDS}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or (words[0].startswith("-") and words[0] not in ("-h", "--help", "--version")):
        words = ["tui", *words]  # `ratui` and `ratui --project DIR` open the console
    args = parser.parse_args(words)
    as_json = getattr(args, "json", False)
    try:
        return COMMANDS[args.command](args)
    except RatuiError as exc:
        _err(exc, as_json)
        return EXIT_USAGE if is_usage_error(exc.code) else EXIT_FAILED
    except ProjectErrors as exc:
        for e in exc.errors:
            _err(e, as_json)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as exc:  # never a traceback on the terminal: a coded error, the traceback in a log file
        if _is_database_error(exc):
            _err(RatuiError("RAT-PRJ-008", f"the state database cannot be read: {_first_line(exc)}",
                            file=_state_db(getattr(args, "project", None))), as_json)
            return EXIT_USAGE
        log = _crash_log(getattr(args, "project", None))
        _err(RatuiError("RAT-RUN-002", f"{type(exc).__name__}: {_first_line(exc)}",
                        hint=f"This is a bug in ratui; the traceback is in {log}. main is unchanged."), as_json)
        return EXIT_FAILED


def _reader_went_away() -> int:
    """stdout's reader closed the pipe (`ratui runs | head`): stop quietly, and keep Python from complaining
    again when it flushes stdout at exit."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return EXIT_BROKEN_PIPE


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _is_database_error(exc: BaseException) -> bool:
    import sqlite3

    while exc is not None:
        if isinstance(exc, sqlite3.DatabaseError) or type(exc).__name__ == "DatabaseError":
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _state_db(project: str | None) -> str | None:
    try:
        from ratui.engine.project.settings import DB_FILE, STATE_DIR, find_project_root

        return str(find_project_root(Path(project or ".")) / STATE_DIR / DB_FILE)
    except Exception:
        return None


def _crash_log(project: str | None) -> str:
    import tempfile
    import time
    import traceback

    folder = None
    if project:
        try:
            from ratui.engine.project.settings import find_project_root

            folder = find_project_root(Path(project)) / ".ratui" / "logs"
            folder.mkdir(parents=True, exist_ok=True)
        except Exception:
            folder = None
    path = (folder or Path(tempfile.gettempdir())) / "ratui-crash.log"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} ratui {' '.join(sys.argv[1:])}\n")
        fh.write(traceback.format_exc())
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
