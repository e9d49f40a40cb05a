"""The proof that ratui needs no disk beside Spark's: servers on a hidden disk (tests/hidden_disk.py) with the
tables (and landing zones) on moto's S3 server. A project's local landing zones reach such a server the way ratui
sends them: uploaded to the warehouse's staging prefix for the run (storage/staging.py)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import yaml

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


def upload_landing(project: Path, endpoint: str, bucket: str, prefix: str = "landing") -> dict[str, str]:
    """Every landing zone of the project moved to s3://bucket/prefix/{namespace}/{zone}/ (its files, _samples/
    included) and named in ratui.yaml's landing.zones, read in place: {zone: url}."""
    client = s3_client(endpoint)
    settings = project / "ratui.yaml"
    data = yaml.safe_load(settings.read_text()) or {}
    zones: dict[str, str] = {}
    for folder in sorted(project.glob("*/landing/*")):
        if not folder.is_dir():
            continue
        namespace, zone = folder.parent.parent.name, folder.name
        url = f"s3://{bucket}/{prefix}/{namespace}/{zone}/"
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            client.put_object(Bucket=bucket, Key=f"{prefix}/{namespace}/{zone}/{path.relative_to(folder).as_posix()}",
                              Body=path.read_bytes())
        shutil.rmtree(folder)
        zones[f"{namespace}.{zone}"] = url
    data["landing"] = {**(data.get("landing") or {}), "s3": {"endpoint_url": endpoint}, "zones": zones,
                       "s3_read": "in_place"}
    settings.write_text(yaml.safe_dump(data, sort_keys=False))
    return zones
