"""moto's S3-compatible server, started for real on 127.0.0.1 (its own process, a real HTTP endpoint) and stopped
by the tests that use it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.processes import stop_group

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _moto_command() -> list[str]:
    found = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if found:
        return [found]
    return [sys.executable, "-m", "moto.server"]


@contextmanager
def moto_server(log_dir: Path, *, auth: bool = False) -> Iterator[str]:
    """Yields the endpoint URL. `auth`: the server checks credentials (and refuses every key it does not know)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}
    if auth:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"moto-{port}.log", "wb")
    proc = subprocess.Popen(_moto_command() + ["-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {proc.returncode}: see {log.name}")
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not answer on {url} within {START_TIMEOUT:.0f} s") from None
                time.sleep(0.2)
        yield url
    finally:
        stop_group(proc)
        log.close()


def s3_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def new_bucket(endpoint: str, versioned: bool = False, prefix: str = "lake") -> str:
    """A bucket of its own for one test (a JVM caches S3A file systems by bucket: never reuse a name)."""
    import uuid

    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client = s3_client(endpoint)
    client.create_bucket(Bucket=name)
    if versioned:
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def isolate_aws(monkeypatch, tmp_path: Path) -> None:
    """Credentials from the environment (boto3's chain), no shared config of the machine's user."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


def past_the_second(t: float | None = None) -> float:
    """Wait until the clock is in a later whole second than `t` (default: now), and return the time then: an object
    store keeps an object's LastModified in whole seconds, so what is written from now on is dated after `t`'s
    second. A wait for the clock itself, not a guess at a pace."""
    mark = int(time.time() if t is None else t)
    while time.time() < mark + 1:
        time.sleep(0.02)
    return time.time()
