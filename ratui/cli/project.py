"""`ratui init` and `ratui check`: a new project, and every problem of one (nothing runs)."""

from __future__ import annotations

import json
from pathlib import Path

from ratui.cli.common import (
    EXIT_FAILED, EXIT_OK, EXIT_USAGE, LIST_UP_TO, engine as _engine, err as _err, project_arg as _project_arg, table,
)


def add_parsers(sub) -> None:
    p = sub.add_parser("init", help="create a new project")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--namespace", default=None, help="namespace name (default: derived from DIR)")

    p = sub.add_parser("check", help="compile the project and report every problem (runs nothing)")
    _project_arg(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--list", action="store_true", help=f"list every pipeline with its upstream tables (the default "
                   f"up to {LIST_UP_TO} pipelines; a larger project gets a count per namespace and layer)")
    p.add_argument("--freshness", action="store_true",
                   help="also check each table's freshness (its pipeline's `freshness`): exit 1 when one is past its "
                        "error_after, for CI and cron")


def cmd_init(args) -> int:
    from ratui.engine.project.scaffold import init_project

    path = init_project(Path(args.dir), args.namespace)
    print(f"created project in {path}\nnext: ratui run --project {args.dir}")
    return EXIT_OK


def cmd_check(args) -> int:
    from ratui.engine.project.compiler import compile_project
    from ratui.engine.project.settings import find_project_root

    compiled = compile_project(find_project_root(Path(args.project)))
    errors = compiled.all_errors()
    if args.freshness:
        return _freshness(args, compiled, errors)
    if args.json:
        print(json.dumps({"pipelines": len(compiled.pipelines), "errors": [e.to_dict() for e in errors]}))
    else:
        for e in errors:
            _err(e)
        summary = f"{len(compiled.pipelines)} pipeline(s), {len(errors)} problem(s)"
        if args.list or len(compiled.pipelines) <= LIST_UP_TO:
            print(summary)
            for key in compiled.graph.order():
                p = compiled.pipelines[key]
                ups = ", ".join(p.refs) or "-"
                print(f"  {key:<40} {p.config.merge_strategy if p.config else '?':<13} <- {ups}")
        else:  # a large project: counts, and the summary last, where the eye lands after the errors
            counts: dict[str, dict[str, list[int]]] = {}
            for p in compiled.pipelines.values():
                cell = counts.setdefault(p.namespace, {}).setdefault(p.layer, [0, 0])
                cell[0] += 1
                cell[1] += 0 if p.ok else 1
            for namespace, layers in sorted(counts.items()):
                parts = [f"{n:,} {layer}" + (f" ({bad:,} broken)" if bad else "")
                         for layer, (n, bad) in sorted(layers.items(), key=lambda kv: _LAYER_ORDER.get(kv[0], 9))]
                print(f"  {namespace:<20} {', '.join(parts)}")
            print(f"{len(compiled.pipelines):,} pipeline(s), {len(errors):,} problem(s)  (--list lists every pipeline)")
    return EXIT_USAGE if errors else EXIT_OK


def _freshness(args, compiled, errors) -> int:
    """`ratui check --freshness`: problems first (exit 2), then each table's age against its bounds; exit 1 when one
    is past its error_after (or was never built), 0 otherwise (warnings are printed)."""
    from ratui.engine.project.freshness_terms import age_words

    if errors:
        for e in errors:
            _err(e, args.json)
        return EXIT_USAGE
    rows = _engine(args.project, recover=False).freshness(compiled)
    stale = [r for r in rows if r["state"] == "error"]
    if args.json:
        print(json.dumps({"freshness": rows, "errors": len(stale),
                          "warnings": sum(1 for r in rows if r["state"] == "warn")}))
    elif not rows:
        print("no pipeline declares a freshness (`-- @freshness: 26h`, or freshness: {warn_after, error_after})")
    else:
        print(table(["PIPELINE", "STATE", "AGE", "WARN AFTER", "ERROR AFTER", "LAST SUCCESS (UTC)"], [
            [r["pipeline"], r["state"], age_words(r["age_seconds"]), r["warn_after"] or "-", r["error_after"] or "-",
             (r["last_success"] or "never on main")[:19]] for r in rows]))
    return EXIT_FAILED if stale else EXIT_OK


_LAYER_ORDER = {"bronze": 0, "silver": 1, "gold": 2}

COMMANDS = {"init": cmd_init, "check": cmd_check}
