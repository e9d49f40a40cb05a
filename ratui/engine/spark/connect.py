"""A Spark Connect client (spark.remote, or SPARK_REMOTE): no JVM and no py4j gateway in ratui's process; the
server runs the driver and owns the executors. Starting one (its token's route, whether the server answers and
accepts the token, the SQL settings its sessions get), its calls' bounded retries, and its log kept off the
terminal. session.py holds what the start returns."""

from __future__ import annotations

import logging
import os
import time
import warnings
from typing import Any
from urllib.parse import urlparse

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import DEFAULT_SPARK_CONFIG, SETTINGS_FILE, Settings
from ratui.engine.spark import addresses
from ratui.engine.spark.server_setup import CONNECT_SERVER_CONF  # what the server needs (declared once there)
from ratui.engine.spark.errors import UNREACHABLE_CODE, error_message

log = logging.getLogger("ratui.spark")

# A Spark Connect server runs with its own static settings (the ones launch_conf.py's REQUIRED_CONF has that are not
# spark.sql.*: see server_setup.py CONNECT_SERVER_CONF); a client can only set SQL settings, on each of its sessions.
CONNECT_SESSION_PREFIX = "spark.sql."

# A Connect server that stops answering mid-run (restarted, gone): how long a call keeps retrying before the run
# fails is spark.connect_retry_seconds (default 44; the client's own default is ten minutes). Backoff 0.05, 0.2,
# 0.8, 3.2 s, then 10 s each, as many as reach that many seconds (44: eight retries). Once a call has given up, the
# calls that follow within CONNECT_GONE_SECONDS (the failed run's cleanup: its views, its session) try once each
# instead of waiting as long again.
CONNECT_INITIAL_BACKOFF_MS, CONNECT_BACKOFF_MULTIPLIER, CONNECT_MAX_BACKOFF_MS = 50, 4.0, 10_000
CONNECT_GONE_SECONDS = 60.0

TOKEN_CODE = "RAT-SPK-003"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # PySpark's own: the client sends it, a server started with it wants it


def start(settings: Settings, required: dict[str, str], retries: RetryBounds):
    """A Spark Connect client for settings.spark_remote: (its session, the SQL settings every session gets, what the
    server says about itself). The SQL settings ratui needs (`required`'s and ratui.yaml's spark.sql.* ones) are
    set on every session; the server's static settings are its own (server_setup.py)."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's C core would print to the terminal the console draws on
    # a call that gives up says so with a warning on stderr as well as with its error
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]", category=UserWarning)
    _quiet_connect_client(settings)
    url = settings.spark_remote
    assert url is not None
    host, port = addresses.remote_address(url)
    _check_token_route(url, settings)
    addresses.check_reachable(host, port, f"Spark Connect server {addresses.display_url(url)}", "spark.remote")
    from pyspark.sql import SparkSession

    retries.seconds = settings.spark_connect_retry_seconds
    try:
        session = SparkSession.builder.remote(url).create()
        retries.bound(session)
    except Exception as exc:  # e.g. PACKAGE_NOT_INSTALLED: the connect extra is missing
        raise RatuiError(UNREACHABLE_CODE, f"cannot start a Spark Connect client for {addresses.display_url(url)}: "
                         f"{addresses.redact(error_message(exc))}", file=str(settings.root / SETTINGS_FILE),
                         hint="Install ratui's connect extra (pip install 'ratui[connect]', which brings "
                              "pyspark[connect]).") from None
    _check_authenticated(session, url, settings)
    wanted = {k: v for k, v in {**settings.spark_config, **required}.items()
              if k.startswith(CONNECT_SESSION_PREFIX)}
    applied: dict[str, str] = {}
    notes = []
    for key, value in wanted.items():
        try:
            session.conf.set(key, value)
            applied[key] = value
        except Exception as exc:  # a static SQL setting (spark.sql.warehouse.dir, ...): the server's value holds
            notes.append(f"{key} is the server's to set ({error_message(exc)})")
    # each bucket Spark reaches (its endpoint and key: a server does not share this process's environment), set
    # like the SQL settings on every session; never logged
    from ratui.engine.spark import s3a

    for key, value in s3a.session_conf(settings).items():
        try:
            session.conf.set(key, value)
            applied[key] = value
        except Exception as exc:
            notes.append(f"{key} was refused by the server ({error_message(exc)[:120]})")
    ignored = sorted(k for k, v in settings.spark_config.items()
                     if not k.startswith(CONNECT_SESSION_PREFIX) and DEFAULT_SPARK_CONFIG.get(k) != v)
    if ignored:
        notes.append(f"ratui.yaml settings the server owns, not applied: {', '.join(ignored)}")
    server = {}
    for key in ("spark.master", "spark.app.name", *CONNECT_SERVER_CONF):
        server[key] = session.conf.get(key, None) or ""
    server["version"] = session.version
    for key, value in CONNECT_SERVER_CONF.items():
        if server.get(key, "").lower() != value.lower():
            notes.append(f"the server runs with {key}={server.get(key) or '(unset)'}; ratui wants {value}")
    _log_to_file(settings, [f"Spark Connect {addresses.display_url(url)}: server Spark {server['version']}, master "
                            f"{server['spark.master']}"] + notes)
    return session, applied, server


class RetryBounds:
    """The retries of this process's Connect calls: each call gives up after spark.connect_retry_seconds (about
    44 s by default), not the client's ten minutes, and while the server is known to be gone (a call gave up less
    than CONNECT_GONE_SECONDS ago) calls try only once. One per process (session.py's runtime holds it)."""

    def __init__(self) -> None:
        self.gone_at: float | None = None  # when a call last gave up
        self.seconds = 44  # spark.connect_retry_seconds of the project that started the client (start())
        self._policy_class: Any = None

    @staticmethod
    def retries_for(seconds: float) -> int:
        """How many retries of the backoff schedule above add up to `seconds` (at least one)."""
        waited, retries, wait = 0.0, 0, float(CONNECT_INITIAL_BACKOFF_MS)
        while waited < seconds or retries == 0:
            waited += min(wait, CONNECT_MAX_BACKOFF_MS) / 1000
            wait *= CONNECT_BACKOFF_MULTIPLIER
            retries += 1
        return retries

    def bound(self, session) -> None:
        """`session`'s calls retry within these bounds."""
        try:
            session.client.set_retry_policies([self._policy()])
        except Exception:  # another client version: its own policy holds
            log.debug("could not bound the Spark Connect client's retries", exc_info=True)

    def _policy(self):
        if self._policy_class is None:
            from pyspark.sql.connect.client.retries import DefaultPolicy, RetryPolicyState

            bounds = self

            class GiveUpState(RetryPolicyState):
                def next_attempt(self, exception=None):
                    wait = super().next_attempt(exception)
                    if wait is None:  # this call gave up: the server is gone for now
                        bounds.gone_at = time.monotonic()
                    return wait

            class RatuiPolicy(DefaultPolicy):
                def can_retry(self, exception: BaseException) -> bool:
                    gone = bounds.gone_at
                    if gone is not None and time.monotonic() - gone < CONNECT_GONE_SECONDS:
                        return False
                    return super().can_retry(exception)

                def to_state(self):
                    return GiveUpState(self)

            self._policy_class = RatuiPolicy
        return self._policy_class(max_retries=self.retries_for(self.seconds), max_backoff=CONNECT_MAX_BACKOFF_MS,
                                  initial_backoff=CONNECT_INITIAL_BACKOFF_MS,
                                  backoff_multiplier=CONNECT_BACKOFF_MULTIPLIER)


def _check_token_route(url: str, settings: Settings) -> None:
    """PySpark sends a token without TLS only to the name `localhost` (gRPC's local credentials); to any other
    name it opens TLS, which a plain server answers with handshake failures and retries for a minute. Said at
    once instead, with the fix."""
    params = addresses.url_params(url)
    has_token = bool(params.get("token") or os.environ.get(TOKEN_ENV))
    host = urlparse(url).hostname or "localhost"
    if has_token and params.get("use_ssl", "").lower() != "true" and host != "localhost":
        where = "in spark.remote" if params.get("token") else f"in {TOKEN_ENV}"
        raise RatuiError(TOKEN_CODE, f"a Spark Connect token ({where}) is sent only to sc://localhost or over TLS, "
                         f"and {addresses.display_url(url)} names {host} without use_ssl=true",
                         file=str(settings.root / SETTINGS_FILE),
                         hint="For a server on this machine write sc://localhost:PORT (its token is then sent over "
                              "the loopback connection only); for another machine, serve TLS and add ;use_ssl=true.")


def _check_authenticated(session, url: str, settings: Settings) -> None:
    """The first call to the server: a refused token (or none given to a server that wants one) is RAT-SPK-003
    naming the cause, never the token."""
    try:
        session.version  # noqa: B018 - a call to the server
    except Exception as exc:
        message = addresses.redact(error_message(exc))
        if "UNAUTHENTICATED" in message or "UNAUTHENTICATED" in str(exc):
            _close_quietly(session)
            given = bool(addresses.url_params(url).get("token") or os.environ.get(TOKEN_ENV))
            cause = ("refused the token ratui gave it" if given else "wants a token and ratui gave none")
            raise RatuiError(TOKEN_CODE, f"the Spark Connect server {addresses.display_url(url)} {cause}: {message}",
                             file=str(settings.root / SETTINGS_FILE)) from None
        raise


def _close_quietly(session) -> None:
    try:
        session.stop()
    except Exception:  # noqa: BLE001 - it never authenticated: nothing to release on the server
        pass


def _quiet_connect_client(settings: Settings) -> None:
    """The Connect client logs (when SPARK_CONNECT_LOG_LEVEL asks for it) to a file, never to the terminal."""
    client_logger = logging.getLogger("pyspark.sql.connect.logging")
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(settings.log_dir / "spark-connect.log", encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(funcName)s %(message)s"))
    handler.addFilter(_Redacted())
    client_logger.handlers[:] = [handler]
    client_logger.propagate = False


class _Redacted(logging.Filter):
    """A record's text with any token replaced by *** (the client logs its connection string when asked to)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.msg, record.args = addresses.redact(record.getMessage()), None
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is logged as it is
            pass
        return True


def _log_to_file(settings: Settings, lines: list[str]) -> None:
    """A few lines in .ratui/logs/spark.log (where a JVM of our own writes its log)."""
    try:
        settings.log_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(settings.log_dir / "spark.log", "a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(f"{stamp} INFO ratui.spark: {line}\n")
    except OSError:
        pass
