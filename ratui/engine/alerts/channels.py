"""Sending one alert to one channel, once: no retries, no rate limits here (dispatch.py decides those).

Three kinds of channel (alert_terms.py), each a function that returns a Sent (ok, retry-worthy, why):

- `url_env` holding http:// or https://: the alert POSTed as JSON (requests), never following a redirect (a
  redirect could send it elsewhere: refused, said);
- `url_env` holding any other URL: Apprise sends it (Slack, Teams, email over SMTP, PagerDuty, ntfy, Discord, JSON
  and about a hundred more, each by its URL scheme);
- `command`: the argv run with the alert as JSON on its stdin, no shell, in a session of its own (killed whole on
  its timeout).

Nothing here prints, and what it returns never holds the URL or a part of it: `target` is the scheme and host of an
http(s) URL, the scheme alone of any other (Apprise puts tokens where a host would be), a command's program name;
`why` is passed through `redact` with the URL's parts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from ratui.engine.project.alert_terms import AlertChannel

MIN_SECRET_PART = 4  # parts of a URL this long or longer are taken out of any text shown


@dataclass(frozen=True)
class Sent:
    ok: bool
    retry: bool  # a failure worth another try (a timeout, a 5xx, a dropped connection), not a refusal
    why: str


def target_of(channel: AlertChannel, env: Mapping[str, str]) -> str:
    """What an attempt's record says it was sent to: never a secret."""
    if channel.command:
        return f"command: {os.path.basename(channel.command[0])}"
    url = (env.get(channel.url_env or "") or "").strip()
    if not url:
        return f"({channel.url_env} not set)"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unreadable URL)"
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme}://…" if parts.scheme else "(not a URL)"


def secret_parts(url: str) -> list[str]:
    """The pieces of a URL that may be secrets: all of it, its user and password, path segments, query values
    and, for a scheme that is not http(s), its host (Apprise's schemes put tokens there)."""
    found = [url]
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    pieces = [parts.username or "", parts.password or "", *parts.path.split("/"),
              *(value for _, _, value in (pair.partition("=") for pair in parts.query.split("&")))]
    if parts.scheme not in ("http", "https"):
        pieces.append(parts.hostname or "")
    for piece in pieces:
        for one in {piece, unquote(piece)}:
            if len(one) >= MIN_SECRET_PART:
                found.append(one)
    return sorted(set(found), key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "…")
    return re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://\S+", lambda m: m.group(0).split("://")[0] + "://…", text)


def send(channel: AlertChannel, alert: dict[str, Any], env: Mapping[str, str]) -> Sent:
    """One try. Never raises: every failure is a Sent with why."""
    if channel.command:
        return _command(channel, alert)
    url = (env.get(channel.url_env or "") or "").strip()
    if not url:
        return Sent(False, False, f"RAT-ALR-005 the variable {channel.url_env} is not set (or empty) here")
    secrets = secret_parts(url)
    try:
        if urlsplit(url).scheme in ("http", "https"):
            return _http(url, channel.timeout_seconds, alert, secrets)
        return _apprise(url, channel.timeout_seconds, alert, secrets)
    except Exception as exc:  # noqa: BLE001 - a library's surprise is a failed attempt, said without the URL
        return Sent(False, True, redact(f"{type(exc).__name__}: {exc}", secrets))


def _http(url: str, timeout: int, alert: dict[str, Any], secrets: list[str]) -> Sent:
    import requests

    try:
        answer = requests.post(url, json=alert, timeout=timeout, allow_redirects=False,
                               headers={"User-Agent": "ratui-alerts"})
    except requests.Timeout:
        return Sent(False, True, f"no answer within {timeout} s")
    except requests.RequestException as exc:
        return Sent(False, True, redact(f"cannot reach it: {type(exc).__name__}", secrets))
    status = answer.status_code
    if 200 <= status < 300:
        return Sent(True, False, f"HTTP {status}")
    if 300 <= status < 400:
        where = urlsplit(answer.headers.get("Location", "")).hostname or "elsewhere"
        return Sent(False, False, f"HTTP {status}: redirected to {redact(where, secrets)}; redirects are not "
                                  "followed (point url_env at the final URL)")
    return Sent(False, status >= 500 or status == 429, f"HTTP {status}")


def _apprise(url: str, timeout: int, alert: dict[str, Any], secrets: list[str]) -> Sent:
    import logging

    import apprise

    sender = apprise.Apprise()
    if not sender.add(url):
        return Sent(False, False, "Apprise knows no such URL (its scheme, or its form): see Apprise's list of "
                                  "services")
    outcome: dict[str, Any] = {}

    def notify() -> None:
        with apprise.LogCapture(level=logging.WARNING) as captured:
            outcome["ok"] = sender.notify(title=alert["title"], body=alert["text"])
            outcome["log"] = captured.getvalue()

    worker = threading.Thread(target=notify, name="ratui-alert-apprise", daemon=True)
    worker.start()
    worker.join(timeout + 5)  # Apprise's own connect and read timeouts come first
    if worker.is_alive():
        return Sent(False, True, f"no answer within {timeout} s")
    if outcome.get("ok"):
        return Sent(True, False, "sent by Apprise")
    lines = [line.strip() for line in str(outcome.get("log") or "").splitlines() if line.strip()]
    return Sent(False, True, redact("Apprise: " + ("; ".join(lines[-3:]) or "not sent"), secrets)[:500])


def _command(channel: AlertChannel, alert: dict[str, Any]) -> Sent:
    try:
        process = subprocess.Popen(list(channel.command or ()), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return Sent(False, False, f"cannot start {os.path.basename((channel.command or ('?',))[0])}: "
                                  f"{exc.strerror}")
    try:
        _, err = process.communicate(json.dumps(alert).encode(), timeout=channel.timeout_seconds)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        return Sent(False, True, f"did not finish within {channel.timeout_seconds} s: stopped")
    if process.returncode == 0:
        return Sent(True, False, "exit code 0")
    last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or [""]
    return Sent(False, True, f"exit code {process.returncode}" + (f": {last[0][:200]}" if last[0] else ""))
