"""The door rules every network endpoint of ratui shares (`ratui web`'s console, `ratui serve`'s Iceberg REST
catalog): the per-launch token, compared in constant time; the Host allow-list (a DNS-rebinding page names its own
host); the Origin rule (a request a browser sends from another site's page carries that page's Origin); loopback
by default; and the check that an address can be listened on, before anything starts.

Each server keeps what is its own: ratui web trades the token for a cookie and refuses with an HTML page
(web/access.py); the REST catalog takes only `Authorization: Bearer` and refuses in the Iceberg REST error shape
(rest/guard.py). Nothing here imports aiohttp, textual-serve or the engine's internals, and nothing here logs or
puts a token in an error message.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import os
import re
import secrets
import socket
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urlsplit

from ratui.engine.errors import RatuiError

MIN_TOKEN_LENGTH = 16
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def checked_token(token: str, source: str, code: str = "RAT-WEB-005") -> str:
    """A token given by the user (an option or an environment variable, named by `source`), or `code` saying what
    is wrong with it; the message never holds the token itself."""
    if token != token.strip() or not token:
        raise RatuiError(code, f"the token of {source} is empty or has blanks around it")
    if len(token) < MIN_TOKEN_LENGTH:
        raise RatuiError(code, f"the token of {source} is {len(token)} characters long; it needs at least "
                               f"{MIN_TOKEN_LENGTH}")
    if not _TOKEN_CHARS.fullmatch(token):
        raise RatuiError(code, f"the token of {source} has characters a URL cannot carry as they are "
                               "(letters, digits and . _ ~ - only)")
    return token


@dataclass(frozen=True)
class DoorCodes:
    """A server's codes for the refusals of its door's options (`ratui web`: RAT-WEB-*, `ratui serve`: RAT-REST-*)."""

    port: str  # out of range
    remote: str  # a host other machines reach, without --allow-remote
    allow_host: str  # an --allow-host that is not a host name
    token: str  # a --token or environment token that will not do


def check_door(*, host: str, port: int, allow_remote: bool, allow_hosts: list[str], token: str | None,
               token_env: str, codes: DoorCodes, keep_env: bool = True) -> str:
    """The refusals every server's options share, before anything listens; returns the token to require: --token,
    else the environment's `token_env` (taken out of this process's environment unless `keep_env`: the processes
    a server starts never see it), else a fresh one."""
    if not 1 <= port <= 65535:
        raise RatuiError(codes.port, f"port {port} is out of range (1-65535)")
    if not allow_remote and not is_loopback(host):
        raise RatuiError(codes.remote, f"--host {host} is reachable from other machines: refused without "
                                       "--allow-remote")
    for entry in allow_hosts:
        if not entry.strip() or "/" in entry or " " in entry.strip():
            raise RatuiError(codes.allow_host, f"--allow-host '{entry[:60]}' is not a host name (NAME or NAME:PORT)")
    environment = os.environ.get(token_env) if keep_env else os.environ.pop(token_env, None)
    if token is not None:
        return checked_token(token, "--token", codes.token)
    if environment is not None:
        return checked_token(environment, token_env, codes.token)
    return new_token()


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two secrets."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def host_port(value: str, default_port: int) -> tuple[str, int | None]:
    """'Name:8000' -> ('name', 8000); '[::1]:8000' -> ('[::1]', 8000); 'name' -> ('name', default_port).
    A port that is not a number gives None (never allowed)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        name += "]"
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    elif value.count(":") == 1:
        name, _, port_text = value.partition(":")
    elif ":" in value:  # a bare IPv6 address: only valid in brackets
        return value, None
    else:
        name, port_text = value, ""
    if not port_text:
        return name, default_port
    return (name, int(port_text)) if port_text.isdigit() else (name, None)


@dataclass
class HostRules:
    """The host names one server answers to: loopback, the address it listens on, and --allow-host's names."""

    port: int
    allowed_hosts: list[str] = field(default_factory=list)  # names given with --allow-host (NAME or NAME:PORT)
    own_hosts: list[str] = field(default_factory=list)  # the address it listens on, when not a wildcard
    secure: bool = False

    def __post_init__(self) -> None:
        self._exact: set[tuple[str, int]] = set()
        self._any_port: set[str] = set()
        for name in (*LOOPBACK_NAMES, *self.own_hosts):
            self._exact.add((self._bracketed(name), self.port))
        for entry in self.allowed_hosts:
            name, port = host_port(entry, 0)
            if port == 0:
                self._any_port.add(self._bracketed(name))
            elif port is not None:
                self._exact.add((self._bracketed(name), port))

    @staticmethod
    def _bracketed(name: str) -> str:
        name = name.strip().lower()
        return f"[{name}]" if ":" in name and not name.startswith("[") else name

    def host_allowed(self, host: str | None) -> bool:
        if not host:
            return False
        name, port = host_port(host, 443 if self.secure else 80)
        if port is None:
            return False
        return (name, port) in self._exact or name in self._any_port

    @staticmethod
    def origin_matches(origin: str | None, host: str | None) -> bool:
        """The Origin names this page's own host:port (as the browser sent it in Host), over http or https."""
        if not origin or not host or origin == "null":
            return False
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or parts.path not in ("", "/") or parts.query or parts.username:
            return False
        return parts.netloc.lower() == host.strip().lower()


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` (or `token TOKEN`) header, else None."""
    scheme, _, value = (authorization or "").partition(" ")
    return value.strip() or None if scheme.lower() in ("token", "bearer") else None


def is_loopback(host: str) -> bool:
    """True when every address `host` names is this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {str(info[4][0]) for info in infos}
    try:
        return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
    except ValueError:
        return False


def url_for(host: str, port: int, scheme: str = "http") -> str:
    """The address to give a client: a wildcard host (every interface) is shown as this machine's name."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


# which code says what, per server: "in_use" (port taken), "port" (out of range, privileged), "host" (cannot be used)
WEB_ADDRESS_CODES = {"in_use": "RAT-WEB-001", "port": "RAT-WEB-002", "host": "RAT-WEB-003"}


def check_address(host: str, port: int, codes: Mapping[str, str] = WEB_ADDRESS_CODES) -> None:
    """Raise a coded error unless a server can listen on host:port: checked before anything starts."""
    if not 1 <= port <= 65535:
        raise RatuiError(codes["port"], f"port {port} is out of range (1-65535)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise RatuiError(codes["host"], f"host '{host}' cannot be resolved: {exc}") from None
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: TIME_WAIT is no clash
            try:
                probe.bind(address)
            except OSError as exc:
                raise bind_error(host, port, exc, codes) from None


def bind_error(host: str, port: int, exc: OSError, codes: Mapping[str, str] = WEB_ADDRESS_CODES) -> RatuiError:
    if exc.errno == errno.EADDRINUSE:
        return RatuiError(codes["in_use"], f"port {port} on {host} is already in use")
    if exc.errno == errno.EACCES:
        return RatuiError(codes["port"], f"port {port} needs privileges this user lacks (ports below 1024)")
    return RatuiError(codes["host"], f"cannot listen on {host}:{port}: {exc.strerror or exc}")
