"""`ratui init` and `ratui check`: a new project, and every problem of one (nothing runs)."""

from __future__ import annotations

import json
from pathlib import Path

from ratui.cli.common import (
    EXIT_OK, EXIT_USAGE, LIST_UP_TO, err as _err,
    project_arg as _project_arg,
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


_LAYER_ORDER = {"bronze": 0, "silver": 1, "gold": 2}

COMMANDS = {"init": cmd_init, "check": cmd_check}
