"""`ratui run`: pipelines in dependency order, one line (or JSON object) per run; Ctrl-C, SIGTERM and SIGHUP
cancel the runs in flight."""

from __future__ import annotations

import json
import sys
import time

from ratui.cli.common import (
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, LIST_UP_TO, engine as _engine, err as _err, positive_int as _positive_int,
    project_arg as _project_arg, result_line as _result_line, served_command as _served_command,
    warm_arg as _warm_arg,
)
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import format_duration


def add_parsers(sub) -> None:
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
    _warm_arg(p)






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

    quiet_skips = len(keys) > LIST_UP_TO  # a large project: the unchanged are counted in the summary, not listed

    def show(result) -> None:
        if args.json:
            print(json.dumps(result.to_dict(), default=str), flush=True)
        elif not (quiet_skips and result.status == "skipped" and result.run_type == "skip" and not result.error):
            print(_result_line(result), flush=True)

    engine.expect_one_shot(keys, compiled, force=args.force, full_refresh=args.full_refresh, ref=args.ref)
    invocation = engine.invocation(keys, trigger="cli", full_refresh=args.full_refresh, force=args.force,
                                   on_result=show, threads=args.threads, ref=args.ref, atomic=args.atomic,
                                   compiled=compiled)
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
        print(f"\n{ok} succeeded ({warned} with warnings), {unchanged} unchanged (skipped"
              + (", not listed: `ratui runs` shows them" if quiet_skips and unchanged else "")
              + f"), {len(results) - ok - unchanged} not succeeded, in {format_duration(wall_ms)}")
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

    state: dict = {"signal": 0, "previous": {}, "served": None}
    served = _served_command()  # run by the warm engine: its client's signals, and the client's stderr
    stderr = served.streams.stderr if served is not None else sys.__stderr__

    def say(text: str) -> None:
        # the process's own stderr: the handler runs on the main thread, which may be running a Python pipeline
        # whose prints sys.stderr routes into the run's log (python_pipeline.captured_prints)
        try:
            print(f"ratui: {text}", file=stderr, flush=True)
        except (OSError, ValueError):  # SIGHUP: the terminal may be gone
            pass

    def watchdog(signum: int) -> None:
        invocation.cancel()
        if not invocation.wait(STOP_SECONDS):
            if served is not None:  # the engine lives on; its client stops at a second signal
                say(f"runs still going {STOP_SECONDS:.0f} s after the stop; they end when their code returns")
                return
            say(f"runs still going {STOP_SECONDS:.0f} s after the stop: exiting; the next ratui records them")
            os._exit(128 + signum)

    def stop(signum, frame) -> None:
        if state["signal"]:
            if served is not None:
                return  # the client has stopped waiting: the cancel goes on here
            raise KeyboardInterrupt  # a second signal that came before the first was handled: stop now
        state["signal"] = signum
        # a second signal stops the process at once: the system's own action, which no Python code can catch (this
        # handler runs in the main thread, which may be running a pipeline that catches every exception, and a
        # cancel keeps raising into it); recovery records what was left
        for number in state["previous"]:
            signal.signal(number, signal.SIG_DFL)
        name = signal.Signals(signum).name
        if not as_json or signum != signal.SIGHUP:
            say(f"{name}: cancelling the runs in flight (main stays as it is); again to stop at once")
        threading.Thread(target=watchdog, args=(signum,), name="ratui-stop", daemon=True).start()

    if served is not None:
        state["served"] = served.on_signal(lambda signum: stop(signum, None))
        return state
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

    if state.get("served") is not None:
        state["served"]()  # no longer listening

    for number, handler in state["previous"].items():
        try:
            signal.signal(number, handler)
        except (ValueError, OSError, TypeError):
            pass


COMMANDS = {"run": cmd_run}
