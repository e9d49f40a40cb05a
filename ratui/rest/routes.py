"""The aiohttp application of `ratui serve`: Iceberg REST catalog routes under `/iceberg/{ref}/v1/`.

Paths are matched here on the raw (still URL-encoded) path, one segment at a time, then each segment is decoded: so
a ref `dev%2Falice` is the ref `dev/alice`, a namespace `ecommerce%1Fsilver` is ("ecommerce", "silver"), and a table
name with an encoded `/` reaches the name check (and is refused there) instead of routing somewhere else. Every
handler runs in a worker thread (the catalog is SQLite, files, or HTTP to Nessie) and answers JSON; every failure is
an Iceberg REST error with ratui's code (shapes.py), never a traceback: an unexpected one goes to the log file.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable

from aiohttp import web

from ratui.endpoint_access import HostRules
from ratui.engine.errors import RatuiError
from ratui.rest import guard, shapes
from ratui.rest.shapes import RestError
from ratui.rest.tables import CreateRequest, TableChangeRequest, Tables, TransactionRequest

log = logging.getLogger("ratui.serve")

# what config's `endpoints` lists: the routes below, in the spec's words
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
]
TABLES = web.AppKey("tables", Tables)
ON_REFUSED: web.AppKey[Callable[[web.Request, RestError], None]] = web.AppKey("on_refused")
_CLIENT = re.compile(r"[^A-Za-z0-9 ._/()+;:-]")


@dataclass
class Call:
    """One request, decoded: the ref, the path's namespace and table, the query, the body, the client's name."""

    ref: str
    namespace: tuple[str, ...]
    table: str | None
    query: dict[str, str]
    body: bytes
    client: str

    @property
    def key(self) -> str:
        return shapes.table_key(self.namespace, self.table or "")

    def json(self) -> Any:
        return shapes.parse_json(self.body)


Route = Callable[[Tables, Call], tuple[int, Any]]


def _namespace_param(value: str) -> tuple[str, ...]:
    """A namespace in the query (`parent`): parts split by the unit separator, or by '.' (no name holds one)."""
    return shapes.checked_namespace(tuple(re.split(r"[\x1f.]", value)))


# ------------------------------------------------------------------------------------------------------ handlers

def config(tables: Tables, call: Call) -> tuple[int, Any]:
    return 200, {"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS}


def list_namespaces(tables: Tables, call: Call) -> tuple[int, Any]:
    parent = _namespace_param(call.query["parent"]) if call.query.get("parent") else ()
    return 200, {"namespaces": [list(ns) for ns in tables.namespaces(call.ref, parent)]}


def create_namespace(tables: Tables, call: Call) -> tuple[int, Any]:
    body = call.json()
    if not isinstance(body, dict):
        raise shapes.bad_request("create namespace: a JSON object is expected")
    namespace = shapes.checked_namespace(body.get("namespace"))
    properties = body.get("properties") or {}
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise shapes.bad_request("create namespace: properties is an object of strings")
    tables.create_namespace(call.ref, namespace, properties)
    return 200, {"namespace": list(namespace), "properties": properties}


def load_namespace(tables: Tables, call: Call) -> tuple[int, Any]:
    return 200, {"namespace": list(call.namespace),
                 "properties": tables.namespace_properties(call.ref, call.namespace)}


def namespace_exists(tables: Tables, call: Call) -> tuple[int, Any]:
    tables.require_namespace(call.ref, call.namespace)
    return 204, None


def drop_namespace(tables: Tables, call: Call) -> tuple[int, Any]:
    tables.drop_namespace(call.ref, call.namespace)
    return 204, None


def namespace_properties(tables: Tables, call: Call) -> tuple[int, Any]:
    body = call.json()
    if not isinstance(body, dict):
        raise shapes.bad_request("update properties: a JSON object is expected")
    removals, updates = body.get("removals") or [], body.get("updates") or {}
    if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals) or \
            not isinstance(updates, dict) or not all(isinstance(v, str) for v in updates.values()):
        raise shapes.bad_request("update properties: removals is a list of strings, updates an object of strings")
    return 200, tables.update_namespace_properties(call.ref, call.namespace, set(removals), updates)


def list_tables(tables: Tables, call: Call) -> tuple[int, Any]:
    return 200, {"identifiers": [{"namespace": list(ns), "name": name}
                                 for ns, name in tables.list_tables(call.ref, call.namespace)]}


def create_table(tables: Tables, call: Call) -> tuple[int, Any]:
    request = shapes.parse_model(CreateRequest, call.json(), "create table")
    location, metadata = tables.create(call.ref, call.namespace, request, client=call.client)
    return 200, shapes.load_result(location, metadata)


def load_table(tables: Tables, call: Call) -> tuple[int, Any]:
    table = tables.load(call.ref, call.key)
    return 200, shapes.load_result(table.metadata_location, table.metadata)


def table_exists(tables: Tables, call: Call) -> tuple[int, Any]:
    if call.key not in tables.pointers(call.ref):
        raise shapes.no_table(call.key, call.ref)
    return 204, None


def commit_table(tables: Tables, call: Call) -> tuple[int, Any]:
    change = shapes.parse_model(TableChangeRequest, call.json(), "commit table")
    if change.identifier is not None and _key_of(change.identifier) != call.key:
        raise shapes.bad_request("commit table: the body's identifier is not the table of the path")
    [(location, metadata)] = tables.commit(call.ref, [(call.key, change.requirements, change.updates)],
                                           client=call.client)
    return 200, {"metadata-location": location, "metadata": shapes.metadata_json(metadata)}


def drop_table(tables: Tables, call: Call) -> tuple[int, Any]:
    if call.query.get("purgeRequested", "false").lower() == "true":
        raise shapes.unsupported("purging a table's files (purgeRequested=true): they are shared with other refs "
                                 "and past commits, and ratui's orphan sweep removes what nothing reaches; a drop")
    tables.drop(call.ref, call.key, client=call.client)
    return 204, None


def report_metrics(tables: Tables, call: Call) -> tuple[int, Any]:
    tables.check_ref(call.ref)
    return 204, None  # accepted and not kept: ratui has its own history


def _identifier(value: Any, what: str) -> str:
    if not isinstance(value, dict):
        raise shapes.bad_request(f"{what}: an object with namespace and name is expected")
    namespace = shapes.checked_namespace(value.get("namespace"))
    return shapes.table_key(namespace, shapes.checked_table_name(value.get("name")))


def _key_of(identifier: Any) -> str:
    """A TableIdentifier of a body as a table key, its names checked."""
    namespace = getattr(identifier.namespace, "root", identifier.namespace)
    return shapes.table_key(shapes.checked_namespace(tuple(namespace)), shapes.checked_table_name(identifier.name))


def rename_table(tables: Tables, call: Call) -> tuple[int, Any]:
    body = call.json()
    if not isinstance(body, dict):
        raise shapes.bad_request("rename table: a JSON object is expected")
    source, destination = _identifier(body.get("source"), "source"), _identifier(body.get("destination"),
                                                                                   "destination")
    tables.rename(call.ref, source, destination, client=call.client)
    return 204, None


def commit_transaction(tables: Tables, call: Call) -> tuple[int, Any]:
    request = shapes.parse_model(TransactionRequest, call.json(), "commit transaction")
    changes = []
    for change in request.table_changes:
        if change.identifier is None:
            raise shapes.bad_request("commit transaction: every table change needs its identifier")
        key = _key_of(change.identifier)
        changes.append((key, change.requirements, change.updates))
    tables.commit(call.ref, changes, client=call.client, action="transaction")
    return 204, None


# path after /iceberg/{ref}/v1/ -> method -> handler; "{ns}" and "{table}" stand for one segment each
ROUTES: list[tuple[tuple[str, ...], dict[str, Route]]] = [
    (("config",), {"GET": config}),
    (("namespaces",), {"GET": list_namespaces, "POST": create_namespace}),
    (("namespaces", "{ns}"), {"GET": load_namespace, "HEAD": namespace_exists, "DELETE": drop_namespace}),
    (("namespaces", "{ns}", "properties"), {"POST": namespace_properties}),
    (("namespaces", "{ns}", "tables"), {"GET": list_tables, "POST": create_table}),
    (("namespaces", "{ns}", "tables", "{table}"), {"GET": load_table, "HEAD": table_exists, "POST": commit_table,
                                                   "DELETE": drop_table}),
    (("namespaces", "{ns}", "tables", "{table}", "metrics"), {"POST": report_metrics}),
    (("tables", "rename"), {"POST": rename_table}),
    (("transactions", "commit"), {"POST": commit_transaction}),
]
TABLE_ROUTES = {load_table, table_exists, commit_table, drop_table, report_metrics, create_table}


def match(parts: list[str]) -> tuple[dict[str, Route], dict[str, str]] | None:
    for pattern, methods in ROUTES:
        if len(pattern) != len(parts):
            continue
        found: dict[str, str] = {}
        for want, got in zip(pattern, parts):
            if want.startswith("{"):
                found[want] = got
            elif want != got:
                break
        else:
            return methods, found
    return None


# --------------------------------------------------------------------------------------------------- the app

def _json(status: int, body: Any) -> web.Response:
    if body is None:
        return web.Response(status=status)
    return web.json_response(body, status=status)


def error_response(error: RestError) -> web.Response:
    return web.json_response(error.body(), status=error.status)


async def dispatch(request: web.Request) -> web.StreamResponse:
    """Every request under /iceberg/: the door, the route, the handler in a worker thread, the answer."""
    refused = guard.refusal(request)
    if refused is not None:
        request.app[ON_REFUSED](request, refused)
        return error_response(refused)
    route_name = None
    try:
        raw = request.rel_url.raw_path.split("/")  # ['', 'iceberg', REF, 'v1', ...]
        if len(raw) < 4 or raw[1] != "iceberg" or raw[3] != "v1":
            raise RestError(404, "NoSuchRouteException", "RAT-REST-016",
                            "not a route of this catalog: its URI is /iceberg/REF (e.g. /iceberg/main), then /v1/...")
        found = match(raw[4:])
        if found is None:
            raise RestError(404, "NoSuchRouteException", "RAT-REST-016",
                            f"no route /v1/{'/'.join(raw[4:])[:120]} in ratui's Iceberg REST catalog (views and "
                            "table registration are not served)")
        methods, params = found
        handler = methods.get(request.method)
        if handler is None:
            raise RestError(405, "MethodNotAllowedException", "RAT-REST-016",
                            f"{request.method[:10]} is not allowed here (allowed: {', '.join(sorted(methods))})")
        route_name = handler
        try:
            ref = shapes.segment(raw[2])
            namespace = shapes.namespace_of(params["{ns}"]) if "{ns}" in params else ()
            table = shapes.checked_table_name(shapes.segment(params["{table}"])) if "{table}" in params else None
        except UnicodeDecodeError:
            raise shapes.bad_name("the path is not valid UTF-8 once decoded") from None
        body = await request.read() if request.can_read_body else b""
        agent = _CLIENT.sub("", request.headers.get("User-Agent", ""))[:80].strip()
        call = Call(ref, namespace, table, dict(request.query), body, agent)
        tables = request.app[TABLES]

        def run() -> tuple[int, Any]:
            tables.check_ref(call.ref)
            return handler(tables, call)

        status, answer = await asyncio.get_running_loop().run_in_executor(None, run)
        return _json(status, answer)
    except RestError as exc:
        return error_response(exc)
    except RatuiError as exc:
        return error_response(shapes.from_ratui(exc, table_route=route_name in TABLE_ROUTES))
    except web.HTTPRequestEntityTooLarge:
        return error_response(RestError(413, "BadRequestException", "RAT-REST-010",
                                        f"the body is larger than this catalog takes ({guard.MAX_BODY} bytes)"))
    except Exception as exc:  # noqa: BLE001 - a bug must not reach a client as a traceback
        log.exception("%s %s failed", request.method, request.rel_url.raw_path[:200])
        return error_response(RestError(500, "InternalServerError", "RAT-REST-017",
                                        f"{type(exc).__name__} (details in .ratui/logs/serve.log); nothing was "
                                        "committed unless the ref's log shows it"))


async def not_found(request: web.Request) -> web.StreamResponse:
    refused = guard.refusal(request)
    if refused is not None:
        request.app[ON_REFUSED](request, refused)
        return error_response(refused)
    return error_response(RestError(404, "NoSuchRouteException", "RAT-REST-016",
                                    "not a route of this catalog: its URI is /iceberg/REF (e.g. /iceberg/main)"))


def make_app(tables: Tables, token: str, rules: HostRules,
             on_refused: Callable[[web.Request, RestError], None] | None = None, *,
             token_from: str = "the token `ratui serve` printed when it started") -> web.Application:
    app = web.Application(client_max_size=guard.MAX_BODY)
    app[TABLES] = tables
    app[guard.TOKEN] = token
    app[guard.TOKEN_FROM] = token_from
    app[guard.RULES] = rules
    app[ON_REFUSED] = on_refused or (lambda request, error: None)
    app.router.add_route("*", "/iceberg/{tail:.*}", dispatch)
    app.router.add_route("*", "/{tail:.*}", not_found)
    app.on_response_prepare.append(_headers)
    return app


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
