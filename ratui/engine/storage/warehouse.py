"""Where a project's tables live: a local folder (the project, or catalog.warehouse), or an S3 prefix.

    catalog:
      warehouse: s3://lake/team          # the tables under s3://lake/team/{namespace}/warehouse/{layer}/{name}/
      s3: {endpoint_url: http://127.0.0.1:9000, region: us-east-1, path_style: true}

Both catalogs (embedded and Nessie) create tables at `table_location(key)`; PyIceberg reaches their files with
`file_io_properties()`, Spark with `spark_conf()` (its S3A connector), the reaper lists and removes them with boto3
(ops/orphans.py ObjectStore: pyarrow's S3 file system leaves a folder marker where it deletes a folder's last object).
A run whose Spark cannot see this machine's disk stages what it must hand to Spark (a local landing
zone's files) under `staging(run_id)`, which the run removes and the reaper sweeps when a run died.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ratui.engine.storage.s3 import S3Access, split_url

S3_OPTIONS = ("endpoint_url", "region", "profile", "path_style", "access_key_id", "secret_access_key")

CHECK_SECONDS = 60.0
_checked: dict[tuple, float] = {}  # (warehouse URL, how it is reached) -> when its bucket last answered

STAGING = "_ratui/staging"  # under the warehouse prefix: what runs hand to a Spark that cannot see this disk
SCHEMES = ("s3",)  # object stores ratui has a connector for (Spark's S3A, PyIceberg's S3 file system, boto3)


@dataclass(frozen=True)
class Warehouse:
    root: Path  # the local folder of the tables (the project, or catalog.warehouse); the project when on S3
    s3: S3Access | None = None
    prefix: str = ""  # under the bucket, no slashes at the ends

    @classmethod
    def on_s3(cls, project_root: Path, url: str, access: S3Access) -> "Warehouse":
        return cls(project_root, access, split_url(url)[1])

    @property
    def remote(self) -> bool:
        return self.s3 is not None

    @property
    def url(self) -> str:
        """The warehouse as ratui.yaml names it: s3://bucket/prefix, or the folder."""
        if self.s3 is None:
            return str(self.root)
        return f"s3://{self.s3.bucket}/{self.prefix}".rstrip("/")

    def uri(self, *parts: str) -> str:
        return "/".join([self.url, *[p.strip("/") for p in parts if p]])

    def table_location(self, key: str) -> str:
        namespace, layer, name = key.split(".")
        if self.s3 is None:  # discovery.table_folder's layout
            return str(self.root / namespace / "warehouse" / layer / name)
        return self.uri(namespace, "warehouse", layer, name)

    def namespace_root(self, namespace: str) -> str:
        """Where a namespace's tables are: `{warehouse}/{namespace}/warehouse`."""
        return self.uri(namespace, "warehouse") if self.s3 is not None else str(self.root / namespace / "warehouse")

    def staging(self, run_id: str) -> str:
        return self.uri(STAGING, run_id)

    def file_io_properties(self) -> dict[str, str]:
        return {} if self.s3 is None else self.s3.file_io_properties()

    def spark_conf(self) -> dict[str, str]:
        return {} if self.s3 is None else self.s3.spark_conf()

    def check(self) -> None:
        """Raise RAT-S3-001/002/003 when the warehouse's bucket cannot be reached with its settings (one HEAD
        request; an answer is remembered for a minute): a run fails at once, coded, before it makes a branch."""
        if self.s3 is None:
            return
        now = time.monotonic()
        if now - _checked.get((self.url, self.s3), -CHECK_SECONDS) < CHECK_SECONDS:
            return
        try:
            self.s3.client().head_bucket(Bucket=self.s3.bucket)
        except Exception as exc:
            raise self.s3.error(exc, f"open the warehouse {self.url}", self.url) from None
        _checked[(self.url, self.s3)] = now

    def key(self, uri: str) -> str:
        """An s3:// URI of this warehouse's bucket -> 'bucket/key', the path pyarrow's S3FileSystem takes."""
        return uri.split("://", 1)[1]


def object_warehouse(catalog: dict, project_root: Path) -> Warehouse | None:
    """The s3:// warehouse ratui.yaml's catalog section names (as Settings keeps it), or None for a folder one."""
    url = catalog.get("warehouse")
    if not isinstance(url, str) or "://" not in url:
        return None
    options = catalog.get("s3") or {}
    return _on_s3(project_root, url, tuple(options.get(k) for k in S3_OPTIONS))


@lru_cache(maxsize=16)
def _on_s3(project_root: Path, url: str, options: tuple) -> Warehouse:
    """One Warehouse (and so one credential lookup) per project and settings in a process."""
    return Warehouse.on_s3(project_root, url, S3Access(split_url(url)[0], **dict(zip(S3_OPTIONS, options))))
