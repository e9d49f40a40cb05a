"""A real Nessie server for the tests: Nessie's own runner jar (Quarkus, in-memory version store), started on
127.0.0.1 on a free port in its own process group, its output in a log file, stopped (the whole group) at the end.
Its command is the one docs/team/nessie.md gives a team (ratui/engine/state/catalog/nessie_setup.py command()), with
the test's own ports and settings.

The jar comes from Maven Central (`.ci/run` fetches it with `mvn dependency:get`); RATUI_NESSIE_JAR points at
another one. Nothing it needs is on the network: OpenTelemetry is off, and both its HTTP port and its management
port are free ports on the loopback address.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ratui.engine.state.catalog import nessie_setup
from tests.processes import stop_group

import pytest


VERSION = nessie_setup.VERSION
MIN_JAVA = 21
START_TIMEOUT = 120.0
JAR_ENV = "RATUI_NESSIE_JAR"
NO_ANCESTOR = "2e1cfa82b035c26cbbbdae632cea070514eb8b773f616aaeaf668e2f0be8f10d"  # Nessie's "beginning"
START_TIMES: list[float] = []  # seconds each start took until /config answered (printed by the tests' summary)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nessie_jar() -> Path | None:
    """The runner jar: RATUI_NESSIE_JAR, or the one Maven put in ~/.m2."""
    if os.environ.get(JAR_ENV):
        return Path(os.environ[JAR_ENV])
    m2 = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
    jar = m2 / nessie_setup.RUNNER_PATH
    return jar if jar.is_file() else None


def _feature(java_bin: str) -> int:
    """The Java feature version (17, 21, 25...) of a `java` binary, from its JDK's `release` file or `-version`."""
    release = Path(java_bin).resolve().parent.parent / "release"
    text = release.read_text(errors="replace") if release.is_file() else subprocess.run(
        [java_bin, "-version"], capture_output=True, text=True, timeout=30).stderr
    found = re.search(r'version "?(\d+)', text) or re.search(r'JAVA_VERSION="(\d+)', text)
    return int(found.group(1)) if found else 0


def java() -> str:
    """A Java that runs Nessie 0.99 (built for Java 21: class files version 65; Java 17 refuses them): JAVA_HOME's,
    the one on PATH, or the newest under /usr/lib/jvm."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"], "bin", "java")))
    candidates += [shutil.which("java") or ""]
    candidates += sorted(glob.glob("/usr/lib/jvm/*/bin/java"), key=lambda j: -_feature(j))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and _feature(candidate) >= MIN_JAVA:
            return candidate
    pytest.fail(f"Nessie {VERSION} needs Java {MIN_JAVA} or newer; none found (JAVA_HOME, PATH, /usr/lib/jvm)")


def _die_with_parent() -> None:
    """In the server's process before Java starts: Linux sends it SIGTERM when the process that started it dies, so
    a test process killed by a signal (its `finally` never runs) leaves no Nessie behind."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@contextmanager
def nessie_server(log_dir: Path, properties: dict[str, str] | None = None,
                  env: dict[str, str] | None = None) -> Iterator[str]:
    """Yields Nessie's API v2 base URL (http://127.0.0.1:PORT/api/v2). `properties`: more of Nessie's settings
    (e.g. its Iceberg REST catalog's warehouse: nessie_setup.iceberg_properties); `env`: more of its environment
    (the secrets it reads: nessie_setup.secret_env)."""
    jar = nessie_jar()
    if jar is None:
        pytest.fail(f"Nessie's runner jar {VERSION} is not in ~/.m2: run `mvn -q dependency:get "
                    f"-Dartifact=org.projectnessie.nessie:nessie-quarkus:{VERSION}:jar:runner -Dtransitive=false` "
                    f"or set {JAR_ENV}")
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"nessie-{port}.log", "wb")
    java_bin = java()
    env = {**os.environ, "JAVA_HOME": str(Path(java_bin).resolve().parent.parent), **(env or {})}
    own = {"quarkus.http.port": str(port), "quarkus.http.host": "127.0.0.1",
           # the management interface (health, metrics) is built in: it cannot be turned off at run time, so it
           # gets a free loopback port too (its default, 0.0.0.0:9000, is shared by every server on the machine)
           "quarkus.management.port": str(free_port()), "quarkus.management.host": "127.0.0.1",
           "quarkus.otel.sdk.disabled": "true",
           "quarkus.log.console.enable": "true", "quarkus.log.file.enable": "false",
           "quarkus.analytics.disabled": "true"}
    command = nessie_setup.command({**own, **(properties or {})}, java=java_bin, jar=str(jar),
                                   jvm=["-Xmx512m", "-XX:TieredStopAtLevel=1"])
    proc = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=log_dir,
                            env=env, start_new_session=True, preexec_fn=_die_with_parent)
    base = f"http://127.0.0.1:{port}/api/v2"
    started = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"Nessie exited with {proc.returncode}: see {log.name}")
            try:
                urllib.request.urlopen(base + "/config", timeout=2).read()
                break
            except urllib.error.HTTPError as e:
                if e.code in (401, 403):  # up, with authentication on (TokenIssuer)
                    break
            except OSError:
                pass
            if time.monotonic() - started > START_TIMEOUT:
                raise RuntimeError(f"Nessie did not answer on {base} within {START_TIMEOUT:.0f} s: see {log.name}")
            time.sleep(0.2)
        START_TIMES.append(time.monotonic() - started)
        yield base
    finally:
        stop_group(proc, 20)
        log.close()


def reset(base: str) -> None:
    """Back to an empty server between tests: every branch but main deleted, main assigned to Nessie's beginning
    (the in-memory store cannot be wiped; commits left unreachable do no harm)."""
    import requests

    refs = requests.get(f"{base}/trees", timeout=10).json()["references"]
    for ref in refs:
        if ref["name"] != "main":
            kind = ref["type"]
            requests.delete(f"{base}/trees/{ref['name']}@{ref['hash']}", params={"type": kind},
                            timeout=10).raise_for_status()
    main = requests.get(f"{base}/trees/main", timeout=10).json()["reference"]
    if main["hash"] != NO_ANCESTOR:
        requests.put(f"{base}/trees/main@{main['hash']}", params={"type": "BRANCH"},
                     json={"type": "BRANCH", "name": "main", "hash": NO_ANCESTOR}, timeout=10).raise_for_status()


class TokenIssuer:
    """Bearer tokens a Nessie started with `properties` accepts: JWTs signed with a key of this test run, checked
    by Nessie (Quarkus OIDC) against the public key alone, no identity server. A token's role (in Nessie's
    authorization rules) is its `upn`."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    @property
    def properties(self) -> dict[str, str]:
        """Nessie's settings that turn authentication on with this issuer's key."""
        from cryptography.hazmat.primitives import serialization

        der = self._key.public_key().public_bytes(serialization.Encoding.DER,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
        return {"nessie.server.authentication.enabled": "true",
                "quarkus.oidc.public-key": base64.b64encode(der).decode()}

    def token(self, role: str, valid_for: float = 3600) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        now = int(time.time())
        claims = {"sub": role, "upn": role, "iss": "ratui-tests", "iat": now, "exp": now + int(valid_for)}
        signed = f"{b64(json.dumps({'alg': 'RS256', 'typ': 'JWT'}).encode())}.{b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signed}.{b64(signature)}"
