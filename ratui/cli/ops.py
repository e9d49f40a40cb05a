"""`ratui reap` and `ratui watch`: cleaning up, and re-running what each saved file affects."""

from __future__ import annotations

import json
import sys
import time
from typing import Callable

from ratui.cli.common import (
    EXIT_FAILED, EXIT_OK, engine as _engine, err as _err,
    project_arg as _project_arg, warm_arg,
)
from ratui.engine.vocabulary import format_bytes, format_duration, orphan_groups
from ratui.cli.common import result_line as _result_line


def add_parsers(sub) -> None:
    p = sub.add_parser("reap", help="clean up: stuck runs, orphan branches and files, old snapshots, history")
    _project_arg(p)
    p.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    p.add_argument("--json", action="store_true", help="print the stored report as one JSON object")

    p = sub.add_parser("watch", help="watch the project and re-run what each saved file affects (Ctrl-C stops)")
    p.add_argument("--ref", default="main", metavar="BRANCH", help="run on a branch of yours (default: main)")
    _project_arg(p)
    p.add_argument("--json", action="store_true", help="one JSON object per watch event")
    warm_arg(p)


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
        count = task.count("found") if report.dry_run else task.count("removed")
        size = task.bytes_found if report.dry_run else task.bytes_freed
        line = f"  {task.title:<24} {task.count('found'):>5} found, {count:>5} {verb}"
        if size:
            line += f", {format_bytes(size)}"
        if task.kept:
            line += f" ({task.count('kept')} kept)"
        print(line + f"  [{format_duration(task.duration_ms)}]")
        if name == "orphan_files":  # grouped: dropped tables, deleted branches, then plain orphans
            for group, items, size in orphan_groups(task.found):
                print(f"    {group}: {len(items)} file(s), {format_bytes(size)}")
                for item in items[:shown]:
                    print(f"      {item['name']}  {detail(name, item)}")
                if len(items) > shown:
                    print(f"      ... and {len(items) - shown:,} more (--json lists all)")
        else:
            for item in task.found[:shown]:
                print(f"      {item['name']}  {detail(name, item)}")
        if name != "orphan_files" and task.count("found") > shown:
            print(f"      ... and {task.count('found') - shown:,} more (--json lists all)")
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


def cmd_watch(args) -> int:
    import threading

    from ratui.engine import events as w
    from ratui.engine.watch.watcher import Watcher

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

    stopped = threading.Event()
    unlisten = _stop_watch_on_signals(stopped)
    engine.start_monitor()  # runs of other processes that die are recorded as failed while we watch
    from ratui.engine.ops.branches import check_writable

    try:
        check_writable(engine.state, args.ref)  # a mistyped branch fails now, not at the first save
        watcher = Watcher(engine=engine, on_event=show, ref=args.ref)
        watcher.start()
        try:
            while not stopped.wait(3600):  # a timed wait: a signal's handler (the interrupt) runs in between
                pass
        except KeyboardInterrupt:
            pass
        if not args.json:
            print("stopping", flush=True)
        watcher.stop()
    finally:
        unlisten()
    return EXIT_OK


def _stop_watch_on_signals(stopped) -> Callable[[], None]:
    """Ctrl-C, `kill` (SIGTERM) and the terminal closing (SIGHUP) stop the watch, its runs in flight cancelled. In a
    process of its own: the process's signals (Ctrl-C is Python's KeyboardInterrupt). Served by the warm engine: the
    signals of the command's client, which the engine hands to the command; the engine's other commands go on.
    Returns what stops listening."""
    import signal

    from ratui.cli.common import served_command

    served = served_command()
    if served is not None:
        return served.on_signal(lambda signum: stopped.set())

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    # SIGINT too, as `ratui run` does: a process started with SIGINT ignored (a test runner's worker, a script's
    # background job) would otherwise never see Ctrl-C, and Python installs its own KeyboardInterrupt only when not
    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    return restore


COMMANDS = {"reap": cmd_reap, "watch": cmd_watch}
