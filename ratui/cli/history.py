"""`ratui runs`, `ratui show` and `ratui cancel`: the run history, one run, and stopping a run from any process."""

from __future__ import annotations

import json
import time

from ratui.cli.common import (
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, engine as _engine, err as _err,
    positive_int as _positive_int, project_arg as _project_arg,
    table as _table,
)
from ratui.engine.errors import RatuiError, error_text
from ratui.engine.vocabulary import ACTIVE, RUN_STATUSES, format_duration


def add_parsers(sub) -> None:
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

    p = sub.add_parser("cancel", help="cancel a run (in this or any other ratui process)")
    p.add_argument("run_id", metavar="RUN_ID")
    _project_arg(p)
    p.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                   help="wait this long for the run to end (default 10; 0 returns at once)")


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
    if run.get("isolation"):
        print(f"  python isolation {run['isolation']}")
    print(f"  started {run.get('started_at')}, finished {run.get('finished_at')}, "
          f"took {format_duration(run.get('duration_ms'))}")
    print(f"  rows written {run.get('rows_written') or 0:,}")
    if run.get("error_code"):
        where = f" ({run['error_file']}{':' + str(run['error_line']) if run.get('error_line') else ''})" \
            if run.get("error_file") else ""
        print("  " + error_text(f"error {run['error_code']}:", f"{run['error_message']}{where}", run.get("error_hint"),
                                hint_indent="  "))
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
    if run.get("diff"):
        from ratui.engine.run.diff_text import describe

        print("data diff:")
        for line in describe(run["diff"]):
            print(f"  {line}")
    if run["logs"]:
        print("log:")
        for entry in run["logs"]:
            if entry["level"] != "debug":
                print(f"  {entry['at'][11:23]} {entry['level']:<7} {entry['message']}")
    return EXIT_OK


def cmd_cancel(args) -> int:
    """Writes the request to the database (the running process honours it); no Spark or catalog is loaded."""

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


COMMANDS = {"runs": cmd_runs, "show": cmd_show, "cancel": cmd_cancel}
