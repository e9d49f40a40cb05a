"""`ratui serve`: ratui's branches as an Iceberg REST catalog for other engines (ratui/rest/)."""

from __future__ import annotations

from pathlib import Path

from ratui.cli.common import EXIT_OK, door_args, project_arg as _project_arg


def add_parsers(sub) -> None:
    p = sub.add_parser("serve", help="serve the project's branches as an Iceberg REST catalog (DuckDB, PyIceberg, "
                                     "Spark, Trino read /iceberg/REF), behind a token; Ctrl-C stops")
    _project_arg(p)
    door_args(p, port=8181, clients="clients", token_env="RATUI_SERVE_TOKEN", token_as=" as `Authorization: Bearer "
              "TOKEN`", remote_note="use a TLS proxy")
    p.add_argument("--read-only-ref", action="append", default=[], metavar="REF",
                   help="a ref outside engines may read but not write (repeatable); main always is, unless "
                        "--writable-main")
    p.add_argument("--writable-main", action="store_true",
                   help="let outside engines commit to main directly (by default only ratui's quality gate "
                        "publishes to main: outside writers use a branch and `ratui merge`)")
    p.add_argument("--json", action="store_true", help="one JSON object per server event (serving, stopped)")


def cmd_serve(args) -> int:
    from ratui.engine.project.settings import find_project_root
    from ratui.rest import RestOptions, serve

    root = find_project_root(Path(args.project))
    options = RestOptions(host=args.host, port=args.port, token=args.token, allow_hosts=args.allow_host,
                          allow_remote=args.allow_remote, read_only_refs=args.read_only_ref,
                          writable_main=args.writable_main)
    serve(root, options, as_json=args.json)
    return EXIT_OK


COMMANDS = {"serve": cmd_serve}
