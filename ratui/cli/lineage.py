"""`ratui lineage TABLE[.COLUMN]`: where a column comes from (to the landing zones) and what it feeds, or a table's
columns with their sources. Read from the compiled SQL (sqlglot); nothing runs."""

from __future__ import annotations

import json

from ratui.cli.common import EXIT_OK, engine as _engine, project_arg as _project_arg, table as _table

KIND_WORDS = {"copy": "copy", "derived": "derived", "constant": "constant", "unresolved": "unresolved",
              "table-level": "table-level", "landing": "landing zone"}


def add_parsers(sub) -> None:
    p = sub.add_parser("lineage", help="column lineage: where TABLE.COLUMN comes from and what it feeds, or "
                                       "TABLE's columns with their sources (TABLE: layer.name or "
                                       "namespace.layer.name; a landing zone: landing.zone)")
    p.add_argument("name", metavar="TABLE[.COLUMN]")
    _project_arg(p)
    p.add_argument("--json", action="store_true")


def cmd_lineage(args) -> int:
    engine = _engine(args.project, recover=False)
    lineage = engine.column_lineage()
    key, column = lineage.split_column(args.name)
    namespace = lineage.namespace
    if column is None:
        table = lineage.table(key)
        if args.json:
            print(json.dumps(table.to_dict()))
            return EXIT_OK
        print(_table_head(table, namespace))
        if table.columns:
            rows = [[c.column, KIND_WORDS.get(c.kind, c.kind),
                     ", ".join(s.label(namespace) for s in c.sources) or ("-" if c.kind != "unresolved" else c.note)]
                    for c in table.columns]
            print(_table(["COLUMN", "KIND", "FROM"], rows))
        return EXIT_OK
    path = lineage.column_path(key, column)
    if args.json:
        print(json.dumps(path.to_dict()))
        return EXIT_OK
    origin = path.origin
    head = f"{_short(key, namespace)}.{origin.column}  {KIND_WORDS.get(origin.kind, origin.kind)}"
    print(head + (f": {origin.note}" if origin.note else ""))
    print("upstream (where it comes from)")
    if not path.upstream:
        print("  nothing: " + ("a landing zone's column" if origin.kind == "landing" else
                               "computed from no column" if origin.kind == "constant" else "no source known"))
    for prefix, node in path.lines(path.upstream):
        print("  " + prefix + _node_text(node, namespace))
    print("downstream (what it feeds)")
    if not path.downstream:
        print("  nothing: no pipeline computes a column from it")
    for prefix, node in path.lines(path.downstream):
        print("  " + prefix + _node_text(node, namespace))
    if path.cut:
        print("  … cut: the path is longer than ratui prints (--json holds the same cut path)")
    return EXIT_OK


def _short(key: str, namespace: str) -> str:
    return key[len(namespace) + 1:] if key.startswith(namespace + ".") else key


def _table_head(table, namespace: str) -> str:
    kind = {"sql": "SQL pipeline", "python": "Python pipeline", "zone": "landing zone",
            "broken": "pipeline that does not compile"}.get(table.kind, table.kind)
    text = f"{_short(table.key, namespace)}  {kind}"
    if table.reads:
        text += " · reads " + ", ".join(_short(r, namespace) for r in table.reads)
    if table.problem:
        text += f"\n  {table.problem}"
    return text


def _node_text(node, namespace: str) -> str:
    text = node.label(namespace)
    kind = KIND_WORDS.get(node.kind, node.kind)
    if node.column is not None or node.kind != "derived":
        text += f"  {kind}"
    if node.note:
        text += f" ({node.note})"
    if node.seen:
        text += "  (shown above)"
    return text


COMMANDS = {"lineage": cmd_lineage}
