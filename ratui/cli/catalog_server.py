"""`ratui serve`: ratui's branches as an Iceberg REST catalog for other engines (ratui/rest/)."""

from __future__ import annotations

from pathlib import Path

from ratui.cli.common import EXIT_OK, project_arg as _project_arg


def add_parsers(sub) -> None:
    p = sub.add_parser("serve", help="serve the project's branches as an Iceberg REST catalog (DuckDB, PyIceberg, "
                                     "Spark, Trino read /iceberg/REF), behind a token; Ctrl-C stops")
    _project_arg(p)
    p.add_argument("--port", type=int, default=8181, metavar="N", help="port to listen on (default: 8181)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; any other needs "
                        "--allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a --host other machines can reach (the token is still needed; use a TLS proxy)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="a host name clients may use besides 127.0.0.1, localhost and [::1] (repeatable; a reverse "
                        "proxy's name)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help="the token to require as `Authorization: Bearer TOKEN` (default: RATUI_SERVE_TOKEN, else a "
                        "fresh one per launch); other users of this machine can see a command line, so prefer "
                        "RATUI_SERVE_TOKEN")
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
