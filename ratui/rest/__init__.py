"""`ratui serve`: an Iceberg REST catalog over ratui's branch catalog, so any engine that speaks the Iceberg REST
protocol (PyIceberg's RestCatalog, DuckDB's iceberg extension, Spark, Trino) reads ratui's branches by URL.

The ref is in the path, as on a Nessie server: the catalog URI of branch `dev` is `http://127.0.0.1:8181/iceberg/dev`
(a ref with a slash URL-encoded: `/iceberg/dev%2Falice`; a past state `/iceberg/main@3f2a9c`, read only).

    routes.py   the aiohttp application: the paths, the door (guard.py) and the handlers
    guard.py    who may use it: the bearer token, the Host allow-list, no browser Origin but its own, a capped body
    shapes.py   the Iceberg REST request, response and error shapes, and ratui's codes in them
    tables.py   what a request does to the ref: namespaces, loads, creates, commits (one ratui commit each), drops
    server.py   the options, the server in this process (`RestServer`, a thread of its own) and `serve()` for the CLI

Nothing here imports Textual, the console or the command line; the engine never imports this package.
"""

from ratui.rest.server import DEFAULT_PORT, RestOptions, RestServer, serve

__all__ = ["DEFAULT_PORT", "RestOptions", "RestServer", "serve"]
