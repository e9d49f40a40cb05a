"""A run's staging prefix in the warehouse's bucket: local files handed to a Spark that cannot see this disk.

A cluster's executors or a Spark Connect server on another machine cannot read `{project}/{ns}/landing/{zone}/`.
When the tables are on S3 (catalog.warehouse), a run uploads the landing files it reads to

    {warehouse}/_ratui/staging/{run_id}/landing/{zone}/{name}

and Spark reads them there; ratui's own checks still read the local files. A name Hadoop would misread (`:`,
glob characters, `%` ...: the rule of landing/reader.py) is uploaded under a safe one in `_renamed/` beside them;
errors still name the original file. The run removes its prefix when it ends (whatever the outcome); a prefix
left by a run that died is the reaper's (warehouse.py STAGING).
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ratui.engine.storage.s3 import S3Access
from ratui.engine.storage.warehouse import Warehouse

_SAFE_NAME = re.compile(r"^[A-Za-z0-9._/ +=@-]+$")  # what Hadoop reads as exactly that name (reader.py _SAFE_PATH)
MULTIPART_THRESHOLD = 64 << 20


@dataclass
class RemoteStaging:
    """One run's staging prefix (`key`, no slashes at its ends) in a bucket. Thread-safe."""

    access: S3Access
    key: str
    concurrency: int = 8
    used: bool = False  # something was (or may have been) uploaded: remove() has work
    _renamed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, warehouse: Warehouse, run_id: str) -> "RemoteStaging | None":
        """The run's staging prefix of an object-store warehouse (None for a local one)."""
        if warehouse.s3 is None:
            return None
        key = warehouse.key(warehouse.staging(run_id)).split("/", 1)[1]
        return cls(warehouse.s3, key)

    @property
    def url(self) -> str:
        return f"s3://{self.access.bucket}/{self.key}"

    def place(self, zone: str, name: str) -> str:
        """Where a landing file of `zone` goes under the prefix (relative to it): its own name, or a safe one."""
        if _SAFE_NAME.match(name) and not name.startswith("/"):
            return f"landing/{zone}/{name}"
        with self._lock:
            self._renamed += 1
            number = self._renamed
        suffix = Path(name).suffix.lower()
        return f"landing/{zone}/_renamed/f{number:05d}{suffix if _SAFE_NAME.match(suffix) else ''}"

    def upload(self, files: list[tuple[Path, str]], progress: Callable[[int, int, int], None] | None = None,
               check: Callable[[], None] | None = None) -> list[str]:
        """Upload (local path, place under the prefix) pairs, `concurrency` at a time; their s3:// URIs in order.
        `progress(done, total, bytes)` at most every quarter second and once at the end; `check()` before each
        upload raises to stop (a cancelled run)."""
        if not files:
            return []
        self.used = True
        client = self.access.client(pool=max(10, self.concurrency))
        total = len(files)
        done = [0, 0]
        last = [0.0]
        lock = threading.Lock()

        def one(item: tuple[Path, str]) -> str:
            path, place = item
            if check is not None:
                check()
            key = f"{self.key}/{place}"
            try:
                size = path.stat().st_size
                if size < MULTIPART_THRESHOLD:
                    with open(path, "rb") as body:
                        client.put_object(Bucket=self.access.bucket, Key=key, Body=body)
                else:
                    client.upload_file(str(path), self.access.bucket, key)
            except OSError as exc:  # the local file went away or cannot be read: the read reports it
                raise self.access.error(exc, f"upload {path.name} for Spark", f"s3://{self.access.bucket}/{key}") \
                    from None
            except Exception as exc:
                raise self.access.error(exc, "upload a landing file for Spark",
                                        f"s3://{self.access.bucket}/{key}") from None
            with lock:
                done[0] += 1
                done[1] += size
                now = time.monotonic()
                if progress is not None and (now - last[0] >= 0.25 or done[0] == total):
                    last[0] = now
                    progress(done[0], total, done[1])
            return f"s3://{self.access.bucket}/{key}"

        with ThreadPoolExecutor(max_workers=min(self.concurrency, total), thread_name_prefix="ratui-upload") as pool:
            return list(pool.map(one, files))

    def remove(self, force: bool = False) -> int:
        """Delete everything under the prefix (the run is over): how many objects. Raises a coded error. `force`:
        even when this process uploaded nothing there (a dead run's prefix)."""
        if not self.used and not force:
            return 0
        client = self.access.client()
        removed = 0
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.access.bucket,
                                                                         Prefix=self.key + "/"):
                keys: list[dict[str, Any]] = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=self.access.bucket, Delete={"Objects": keys, "Quiet": True})
                    removed += len(keys)
        except Exception as exc:
            raise self.access.error(exc, "remove a run's staged files", self.url) from None
        self.used = False
        return removed


def run_staging(settings: Any, run_id: str) -> RemoteStaging | None:
    """Where a run hands local landing files to a Spark that cannot see this disk: the run's prefix in an
    object-store warehouse, or None (Spark is local, or the tables are on a disk Spark is expected to see too)."""
    if settings.spark_is_local:
        return None
    warehouse = settings.object_warehouse()
    return RemoteStaging.of(warehouse, run_id) if warehouse is not None else None
