"""`ratui query`: SQL over the tables of a ref (or a past state), as a table, CSV or JSON."""

from __future__ import annotations

import csv
import json
import sys

from ratui.cli.common import (
    EXIT_OK, cell as _cell, engine as _engine, positive_int as _positive_int, project_arg as _project_arg,
    table as _table, warm_arg as _warm_arg,
)


def add_parsers(sub) -> None:
    p = sub.add_parser("query", help="run a SQL query against the tables at a ref")
    p.add_argument("sql", metavar="SQL")
    _project_arg(p)
    p.add_argument("--ref", default="main", help="branch to read, or a past state REF@COMMIT (default: main)")
    p.add_argument("--at", metavar="TIME", help="read the ref as it was at this time (ISO, UTC unless it says)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--limit", type=_positive_int, default=1000, help="most rows to print (default: 1000)")
    _warm_arg(p)


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


COMMANDS = {"query": cmd_query}
