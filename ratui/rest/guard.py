"""Who may use `ratui serve`: the door every request passes before any handler runs.

The rules are the ones every ratui endpoint shares (endpoint_access.py): a request whose Host is not one of this
server's names is refused (a DNS-rebinding page names its own host); a request carrying an Origin that is not this
server's own is refused (a browser puts the page's Origin on every cross-site request, and no Iceberg client sends
one); the per-launch token must come as `Authorization: Bearer TOKEN` (what PyIceberg's `RestCatalog(token=...)` and
DuckDB's `CREATE SECRET (TYPE ICEBERG, TOKEN ...)` send), compared in constant time. A body larger than the cap is
refused before it is read. Refusals are Iceberg REST errors (shapes.py); none names the token.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web

from ratui.endpoint_access import HostRules, bearer, same
from ratui.rest.shapes import RestError

MAX_BODY = 8 * 1024 * 1024  # a commit's JSON (schemas, snapshots' summaries) is kilobytes; 8 MiB is generous

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TOKEN = web.AppKey("token", str)
TOKEN_FROM = web.AppKey("token_from", str)  # where a client finds the token (`ratui serve`'s line, a console's dialog)
RULES = web.AppKey("rules", HostRules)


def refusal(request: web.Request) -> RestError | None:
    """Why `request` may not pass (None: it may); the caller turns it into the error response."""
    rules = request.app[RULES]
    host = request.headers.get("Host")
    if not rules.host_allowed(host):
        return RestError(403, "ForbiddenException", "RAT-REST-012",
                         "this host name is not one of this server's (127.0.0.1, localhost, [::1] and --allow-host's)")
    origin = request.headers.get("Origin")
    if origin is not None and not rules.origin_matches(origin, host):
        return RestError(403, "ForbiddenException", "RAT-REST-012",
                         "a request from a web page of another site (its Origin header) is refused")
    given = bearer(request.headers.get("Authorization"))
    if given is None:
        return RestError(401, "NotAuthorizedException", "RAT-REST-011",
                         "this catalog needs its token: send `Authorization: Bearer TOKEN` "
                         f"({request.app[TOKEN_FROM]})")
    if not same(given, request.app[TOKEN]):
        return RestError(403, "ForbiddenException", "RAT-REST-011", "this is not the token of this server")
    length = request.content_length
    if length is not None and length > MAX_BODY:
        return RestError(413, "BadRequestException", "RAT-REST-010",
                         f"the body is {length} bytes; this catalog takes at most {MAX_BODY}")
    return None
