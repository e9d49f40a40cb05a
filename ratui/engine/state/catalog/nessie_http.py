"""Talking to a Nessie server: its REST API v2 over HTTP, every failure turned into one of ratui's codes.

Only this module knows URLs, status codes and Nessie's error bodies; nessie.py speaks in refs, keys and commits.
Every request has a timeout. A request is retried (a few times, briefly) only when the connection itself failed:
a request that reached Nessie is never sent twice, since a commit Nessie applied but whose answer was lost would
otherwise be applied again. The bearer token goes in a header and nowhere else: not in messages, not in `repr`.

Nessie's error body is `{status, reason, message, errorCode, errorDetails}`; the codes ratui maps:
REFERENCE_NOT_FOUND -> RAT-CAT-002, REFERENCE_ALREADY_EXISTS -> RAT-CAT-001, REFERENCE_CONFLICT (a stale expected
hash on a key that changed, a merge conflict) -> RAT-CAT-003 with the conflicting keys in details["tables"],
CONTENT_NOT_FOUND -> RAT-CAT-005, FORBIDDEN and 401 -> RAT-NES-003. No answer at all -> RAT-NES-001; an answer
that is not Nessie's API v2 (a v1 path, another server) -> RAT-NES-002 naming the URI.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import quote

import requests
from urllib3.exceptions import NewConnectionError

from ratui.engine.errors import RatuiError

CONNECT_TIMEOUT = 3.0
READ_TIMEOUT = 30.0
CONNECT_RETRIES = 2  # attempts after the first, only when no connection was made
RETRY_PAUSE = 0.2


def key_elements(key: str) -> list[str]:
    """"shop.silver.orders" -> ["shop", "silver", "orders"]: ratui's key parts are Nessie's key elements."""
    return key.split(".")


def key_of(elements: list[str]) -> str:
    return ".".join(elements)


def path_key(key: str) -> str:
    """A content key in a URL path: elements joined by '.', a '.' inside an element escaped as Nessie does (\\x1F)."""
    return quote(".".join(e.replace(".", "\x1f") for e in key_elements(key)), safe="")


def ref_path(name: str, hash: str | None = None) -> str:
    """"main" or "main@HASH" in a URL path."""
    return quote(name if hash is None else f"{name}@{hash}", safe="@")


class NessieHttp:
    """One Nessie server at `uri` (its API v2 base, e.g. http://host:19120/api/v2)."""

    def __init__(self, uri: str, token: str | None = None, *, connect_timeout: float = CONNECT_TIMEOUT,
                 read_timeout: float = READ_TIMEOUT):
        self.uri = uri.rstrip("/")
        self._timeout = (connect_timeout, read_timeout)
        self._session = requests.Session()
        self._session.headers["Accept"] = "application/json"
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"

    def __repr__(self) -> str:
        return f"NessieHttp({self.uri!r})"  # never the token

    def close(self) -> None:
        self._session.close()

    # ---------------------------------------------------------------- requests

    def get(self, path: str, **params: Any) -> dict:
        return self._call("GET", path, params=params)

    def post(self, path: str, body: Any = None, **params: Any) -> dict:
        return self._call("POST", path, params=params, json=body)

    def delete(self, path: str, **params: Any) -> dict:
        return self._call("DELETE", path, params=params)

    def _call(self, method: str, path: str, **kwargs: Any) -> dict:
        url = f"{self.uri}/{path.lstrip('/')}"
        kwargs["params"] = {k.replace("_", "-"): v for k, v in (kwargs.get("params") or {}).items() if v is not None}
        for attempt in range(CONNECT_RETRIES + 1):
            try:
                response = self._session.request(method, url, timeout=self._timeout, **kwargs)
                break
            except (requests.ConnectionError, requests.Timeout) as e:
                # only a connection never made is tried again: a request that reached Nessie is never resent
                if attempt == CONNECT_RETRIES or not _never_sent(e):
                    raise RatuiError("RAT-NES-001", f"Nessie at {self.uri} cannot be reached: {_reason(e)}",
                                     details={"uri": self.uri}) from None
                time.sleep(RETRY_PAUSE * (attempt + 1))
        if response.status_code < 300:
            if not response.content:
                return {}
            try:
                return response.json()
            except ValueError:
                raise self._not_nessie(response) from None
        raise self._error(response)

    # ---------------------------------------------------------------- errors

    def _not_nessie(self, response: requests.Response) -> RatuiError:
        return RatuiError("RAT-NES-002", f"{self.uri} is not Nessie's API v2 (HTTP {response.status_code} "
                          f"{response.reason} for {_path(response)})", details={"uri": self.uri})

    def _error(self, response: requests.Response) -> RatuiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "errorCode" not in body:
            if response.status_code in (401, 403):
                return RatuiError("RAT-NES-003", f"Nessie at {self.uri} refused ratui (HTTP {response.status_code})",
                                  details={"uri": self.uri})
            return self._not_nessie(response)
        code, message = body.get("errorCode"), str(body.get("message") or body.get("reason") or "")[:300]
        if code == "REFERENCE_NOT_FOUND":
            return RatuiError("RAT-CAT-002", message, details={"uri": self.uri})
        if code == "REFERENCE_ALREADY_EXISTS":
            return RatuiError("RAT-CAT-001", message)
        if code == "REFERENCE_CONFLICT":
            keys = conflict_keys(body.get("errorDetails")) or keys_in(message)
            return RatuiError("RAT-CAT-003", message, details={"tables": keys})
        if code == "CONTENT_NOT_FOUND":
            return RatuiError("RAT-CAT-005", message)
        if code == "FORBIDDEN" or response.status_code == 401:
            return RatuiError("RAT-NES-003", f"Nessie at {self.uri} refused: {message}", details={"uri": self.uri})
        if code == "BAD_REQUEST" and "reference" in message.lower() and "name" in message.lower():
            return RatuiError("RAT-CAT-006", message)
        return RatuiError("RAT-NES-004", f"Nessie at {self.uri} answered HTTP {response.status_code} {code}: {message}",
                          details={"uri": self.uri, "nessie_code": code})


def conflict_keys(details: Any) -> list[str]:
    """The table keys of a REFERENCE_CONFLICTS error detail (sorted, without duplicates)."""
    conflicts = (details or {}).get("conflicts") or [] if isinstance(details, dict) else []
    return sorted({key_of(c["key"]["elements"]) for c in conflicts if (c.get("key") or {}).get("elements")})


def keys_in(message: str) -> list[str]:
    """The keys a conflict message names when Nessie sends no details (a merge's 409 does not):
    "The following keys have been changed in conflict: 'a.b', 'c.d'"."""
    _, colon, names = message.partition("in conflict:")
    return sorted(set(re.findall(r"'([^']+)'", names))) if colon else []


def _never_sent(e: Exception) -> bool:
    """The connection was never established (refused, no route, connect timeout): the request was not sent."""
    if isinstance(e, requests.ConnectTimeout):
        return True
    reason = getattr(e.args[0], "reason", None) if e.args else None
    return isinstance(reason, NewConnectionError)


def _reason(e: Exception) -> str:
    text = str(e)
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host"):
        if marker in text:
            return marker.lower()
    return type(e).__name__


def _path(response: requests.Response) -> str:
    return requests.utils.urlparse(response.url).path or "/"
