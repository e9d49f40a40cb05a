"""`ratui backfill SELECTOR --start --end`: the intervals of incremental_by_time pipelines over a range of time, in
order (run/backfill.py), with progress: one line updated in place on a terminal, a plain line per interval
otherwise, a JSON object per interval with --json. Ctrl-C, SIGTERM and SIGHUP cancel the intervals in flight: every
finished interval stays published, the rest stay pending (`--resume` runs them). Exit codes as `ratui run`'s."""

from __future__ import annotations

import json
import sys
import time

from ratui.cli.common import (
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, engine as _engine, err as _err, positive_int as _positive_int,
    project_arg as _project_arg, warm_arg as _warm_arg,
)
from ratui.cli.run import _restore_signals, _stop_on_signals
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import format_duration


def add_parsers(sub) -> None:
    p = sub.add_parser("backfill", help="run the intervals of time-range pipelines over a range of time")
    p.add_argument("selectors", nargs="+", metavar="SELECTOR",
                   help="the pipelines (as `ratui run` selects them); their incremental_by_time ones are backfilled")
    _project_arg(p)
    _warm_arg(p)
    p.add_argument("--start", required=True, help="the range's start: an ISO date or timestamp, UTC (included)")
    p.add_argument("--end", required=True, help="the range's end: an ISO date or timestamp, UTC (excluded)")
    p.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                   help="run intervals of up to N different pipelines at once (default: run.threads, else 1)")
    p.add_argument("--resume", action="store_true",
                   help="run only the intervals the tables have not done (that failed or never ran)")
    p.add_argument("--atomic", action="store_true",
                   help="publish every interval in one commit at the end, or nothing if any fails")
    p.add_argument("--ref", default="main", metavar="BRANCH", help="the branch the intervals land on (default: main)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (what would run) and run nothing")
    p.add_argument("--json", action="store_true", help="one JSON object per interval, then the summary")


def _bar(p, width: int = 24) -> str:
    ended = p.done + p.failed + p.skipped
    filled = int(width * ended / p.total) if p.total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


def progress_text(p) -> str:
    estimate = "-" if p.estimate is None else format_duration(p.estimate * 1000)
    return (f"{p.done} done, {p.failed} failed, {p.pending} pending of {p.total} intervals; {p.rows:,} rows; "
            f"{format_duration(p.elapsed * 1000)} elapsed, ~{estimate} left")


def cmd_backfill(args) -> int:
    engine = _engine(args.project, recover=True)
    compiled = engine.compile()
    try:
        keys = compiled.select(args.selectors)
    except RatuiError as exc:
        _err(exc, args.json)
        return EXIT_USAGE
    broken = [e for k in keys for e in compiled.pipelines[k].errors]
    if broken:
        for e in broken:
            _err(e, args.json)
        return EXIT_USAGE
    tty = not args.json and sys.stdout.isatty()

    def on_interval(key, interval, result, p) -> None:
        from ratui.engine.project.intervals import iso

        if args.json:
            print(json.dumps({"pipeline": key, "start": iso(interval[0]), "end": iso(interval[1]),
                              "run_id": result.run_id, "status": result.status, "rows": result.rows_written,
                              "error": result.error, "progress": p.to_dict()}, default=str), flush=True)
            return
        if result.status not in ("success",) or not tty:
            where = f"{key} [{iso(interval[0])}, {iso(interval[1])})"
            detail = f"{result.rows_written:,} rows" if result.status == "success" else \
                (result.error or {}).get("message") or result.reason or ""
            print(("\r\033[K" if tty else "") + f"{result.status.upper():<9} {where} {detail}", flush=True)
            if not tty:
                print(f"  {progress_text(p)}", flush=True)
        if tty:
            print(f"\r\033[K{_bar(p)} {progress_text(p)}", end="", flush=True)

    backfill = engine.backfill(keys, args.start, args.end, resume=args.resume, atomic=args.atomic and not args.dry_run,
                               threads=args.threads, ref=args.ref, compiled=compiled, on_interval=on_interval)
    if args.json:
        print(json.dumps({"event": "plan", **backfill.plan.to_dict()}), flush=True)
    else:
        for target in backfill.plan.targets:
            print(f"{target.key}: {target.todo} of {target.total} {target.batch} interval(s) to run"
                  + (f" ({target.total - target.todo} already done)" if target.total != target.todo else ""))
        if args.atomic:
            print(f"atomically, through {backfill.ref}")
    if args.dry_run:
        return EXIT_OK
    began = time.monotonic()
    stopped_by = _stop_on_signals(backfill, args.json)
    try:
        progress = backfill.run()
    finally:
        _restore_signals(stopped_by)
    return _summary(args, backfill, progress, stopped_by, began)


def _summary(args, backfill, progress, stopped_by: dict, began: float) -> int:
    publish = backfill.publish
    if args.json:
        print(json.dumps({"event": "summary", **progress.to_dict(), "failures": progress.failures,
                          "publish": publish.to_dict() if publish else None}, default=str), flush=True)
    else:
        if sys.stdout.isatty():
            print()
        for f in progress.failures:
            print(f"failed: {f['pipeline']} [{f['start']}, {f['end']}) run {f['run_id']}: "
                  f"{(f['error'] or {}).get('code', '')} {(f['error'] or {}).get('message', '')}")
        if publish is not None:
            print(f"{'published' if publish.merged else 'NOT published'}: {publish.reason}")
        print(f"{progress.done} interval(s) done, {progress.failed} failed, {progress.skipped} skipped (upstream "
              f"failed), {progress.pending} pending; {progress.rows:,} rows in "
              f"{format_duration((time.monotonic() - began) * 1000)}"
              + ("; `--resume` runs the rest" if progress.failed or progress.pending else ""))
    if stopped_by["signal"]:
        return 128 + stopped_by["signal"]
    if publish is not None and not publish.merged:
        return EXIT_FAILED
    return EXIT_OK if progress.failed == 0 and progress.skipped == 0 and progress.pending == 0 else EXIT_FAILED


COMMANDS = {"backfill": cmd_backfill}
