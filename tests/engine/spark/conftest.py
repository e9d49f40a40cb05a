"""The proof that ratui needs no disk beside Spark's: servers on a hidden disk (tests/hidden_disk.py) with the
tables (and landing zones) on moto's S3 server."""

from __future__ import annotations

import uuid

import pytest

from tests.engine.s3_server import isolate_aws, moto_server, s3_client
from tests.hidden_disk import HiddenDisk


@pytest.fixture(scope="session")
def moto(tmp_path_factory):
    """moto's S3 server for the session's Spark server tests: its endpoint URL."""
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture
def bucket(moto, monkeypatch, tmp_path) -> str:
    """A new bucket for this test alone (a JVM caches S3A's file system per bucket name), and AWS keys for ratui's
    processes in the environment only (a hidden server gets none: each session tells it a bucket's settings)."""
    isolate_aws(monkeypatch, tmp_path)
    name = f"proof-{uuid.uuid4().hex[:12]}"
    s3_client(moto).create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def hidden_disk():
    disk = HiddenDisk.start()
    try:
        yield disk
    finally:
        disk.stop()


def bucket_keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    client = s3_client(endpoint)
    out: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def s3_catalog(endpoint: str, bucket: str, prefix: str = "lake") -> dict:
    """ratui.yaml's catalog section for tables in s3://bucket/prefix on moto (keys: boto3's chain)."""
    return {"warehouse": f"s3://{bucket}/{prefix}", "s3": {"endpoint_url": endpoint}}
