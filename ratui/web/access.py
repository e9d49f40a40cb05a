"""Who may use `ratui web`: the per-launch token and the cookie it is traded for, the Host allow-list, the
websocket's Origin check, and the headers every response carries.

The model is Jupyter's. The server makes a secret token at launch (or takes `--token` / RATUI_WEB_TOKEN) and
prints it in the URL it shows. Opening `/?token=...` trades the token for an HttpOnly, SameSite=Strict cookie
and redirects to the bare URL, so the token leaves the address bar and the history. Every route (the page, the
websocket, downloads, the terminal's own scripts) needs the cookie, the token in the query, or an
`Authorization: token ...` header; tokens and cookies are compared in constant time. A request whose Host is
not one of this server's names is refused before anything else (a DNS-rebinding page names its own host), and
a websocket must come from a page of this server (its Origin equals the page's own scheme://host:port): a
browser sends the cookie with a cross-site websocket, so the Origin check is what stops another site's page.

The token, Host and Origin rules themselves are the ones every endpoint of ratui shares (ratui/endpoint_access.py);
this module adds the cookie, the query token and the HTML refusals of a console in a browser.

Nothing here logs a token or a cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import html
from dataclasses import dataclass
from typing import Awaitable, Callable

from aiohttp import web

from ratui.endpoint_access import (  # noqa: F401 - checked_token, new_token and the names below: web's own too
    LOOPBACK_NAMES, MIN_TOKEN_LENGTH, HostRules, checked_token, host_port as _host_port, new_token, same as _same,
)

TOKEN_ENV = "RATUI_WEB_TOKEN"

# on every response, the refusals included
HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


@dataclass
class Access(HostRules):
    """The rules of one server: its token, its port, the host names it answers to (endpoint_access.HostRules),
    whether it serves TLS, and the session cookie the token is traded for."""

    token: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cookie_name = f"ratui-web-{self.port}"  # cookies ignore ports: two servers must not share one
        self.cookie_value = hmac.new(self.token.encode(), b"ratui web session cookie", hashlib.sha256).hexdigest()

    # ---------------------------------------------------------------------------------------- checks

    def credential(self, request: web.Request) -> str | None:
        """How the request proved it holds the token: 'cookie', 'query', 'header', or None."""
        cookie = request.cookies.get(self.cookie_name)
        if cookie and _same(cookie, self.cookie_value):
            return "cookie"
        given = request.query.get("token")
        if given is not None and _same(given, self.token):
            return "query"
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() in ("token", "bearer") and value and _same(value.strip(), self.token):
            return "header"
        return None

    def set_cookie(self, response: web.StreamResponse) -> None:
        response.set_cookie(self.cookie_name, self.cookie_value, path="/", httponly=True, samesite="Strict",
                            secure=self.secure)

    # ------------------------------------------------------------------------------------ middleware

    def middleware(self, on_refused: Callable[[web.Request, int, str], None]):
        """An aiohttp middleware applying the rules to every request, before any handler runs (so a refused
        websocket starts no console)."""

        @web.middleware
        async def guard(request: web.Request,
                        handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
            host = request.headers.get("Host")
            if not self.host_allowed(host):
                on_refused(request, 403, "Host not allowed")
                return refusal(403, "This host name is not one of this server's",
                               "ratui web answers only to 127.0.0.1, localhost, [::1] and the names given with "
                               "--allow-host (a page of another site cannot reach it through its own name).")
            origin = request.headers.get("Origin")
            websocket = request.headers.get("Upgrade", "").lower() == "websocket"
            if (websocket or origin is not None) and not self.origin_matches(origin, host):
                on_refused(request, 403, "Origin not allowed")
                return refusal(403, "Refused: this request does not come from ratui's own page",
                               "The console's websocket answers only pages served by this server.")
            how = self.credential(request)
            if how is None:
                wrong = "token" in request.query or "Authorization" in request.headers
                on_refused(request, 403 if wrong else 401, "wrong token" if wrong else "no token")
                if wrong:
                    return refusal(403, "Wrong token", "This is not the token of this server. " + HOW_TO_GET_IN)
                return refusal(401, "This console needs its token", HOW_TO_GET_IN)
            if how == "query" and request.method == "GET" and not websocket and request.path == "/":
                # trade the token for the cookie and take it out of the address bar (and the history)
                kept = {k: v for k, v in request.query.items() if k != "token"}
                target = str(request.rel_url.with_query(kept))
                response = web.Response(status=302, headers={"Location": target})
                self.set_cookie(response)
                return response
            return await handler(request)

        return guard


HOW_TO_GET_IN = ("Open the address `ratui web` printed when it started (it ends with ?token=...), or run "
                 "`ratui web list --project DIR` on the machine it runs on to see it again.")


def refusal(status: int, title: str, text: str) -> web.Response:
    body = (f"<!doctype html><html><head><meta charset='utf-8'><title>ratui web: {html.escape(title)}</title>"
            f"</head><body style='font-family: sans-serif; max-width: 42em; margin: 3em auto'>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>")
    return web.Response(status=status, text=body, content_type="text/html")


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the anti-framing, no-referrer and no-store headers on every response."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
