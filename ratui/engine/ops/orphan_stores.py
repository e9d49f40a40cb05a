"""Where the orphan sweep (ops/orphans.py) lists and removes files: this machine's disk (`LocalStore`) and an s3://
warehouse's bucket (`ObjectStore`). The plan and its rules are the same for both; only these few operations
differ."""

from __future__ import annotations

import os
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ratui.engine.errors import RatuiError
from ratui.engine.locations import ProjectLocations
from ratui.engine.ops.orphan_mark import object_uri
from ratui.engine.storage.warehouse import Warehouse

KEEP_FOLDERS = {"data", "metadata"}


@dataclass(frozen=True)
class Listed:
    """A file under a swept root: its folders below the root, its path as the mark names it, size and mtime."""

    folders: tuple[str, ...]
    path: str
    size: int
    mtime: float


class Store(ABC):
    """Where the sweep lists and removes files: this machine's disk, or a bucket of an object store. The plan and
    its rules (reachable, young, a live run's folder) are the same for both; only these few operations differ."""

    @abstractmethod
    def listing(self, root: str) -> Iterator[Listed]:
        """Every regular file under `root`, in path order (nothing when `root` does not exist)."""

    @abstractmethod
    def stat(self, path: str) -> tuple[int, float] | None:
        """(size, mtime) of a regular file, None when it is gone (or is not a regular file)."""

    @abstractmethod
    def inside(self, path: str, root: str) -> bool:
        """Whether `path` really lies under `root` (what the reaper may delete)."""

    @abstractmethod
    def delete(self, path: str) -> bool:
        """Delete one file; False when it was gone already."""

    @abstractmethod
    def tidy(self, path: str, stop_at: Iterable[str], whole_folder: bool = False) -> None:
        """Remove what deleting `path` left empty, up to a root in `stop_at` (`data` and `metadata` folders too
        when `whole_folder`)."""


class LocalStore(Store):
    """Files on this machine's disk. Symbolic links are neither followed nor removed; a file is deleted only if it
    resolves inside the root it was planned under (the project, or the shared warehouse)."""

    def listing(self, root: str) -> Iterator[Listed]:
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            rel = tuple(os.path.relpath(folder, root).split(os.sep))
            for name in sorted(names):
                path = os.path.join(folder, name)
                found = self.stat(path)
                if found is not None:
                    yield Listed(rel, path, *found)

    def stat(self, path: str) -> tuple[int, float] | None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        return (st.st_size, st.st_mtime) if stat.S_ISREG(st.st_mode) else None

    def inside(self, path: str, root: str) -> bool:
        return ProjectLocations(root).inside(path)

    def delete(self, path: str) -> bool:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def tidy(self, path: str, stop_at: Iterable[str], whole_folder: bool = False) -> None:
        remove_empty_parents(Path(path).parent, [Path(p) for p in stop_at], names=() if whole_folder else KEEP_FOLDERS)


class ObjectStore(Store):
    """Objects of the warehouse's bucket (s3://bucket/key). An object's mtime is its LastModified. Listed, checked
    and deleted with boto3: pyarrow's S3FileSystem.delete_file writes an empty `folder/` marker object when it
    deletes the last object of a "folder" (measured), so every swept run folder would leave one behind forever."""

    def __init__(self, warehouse: Warehouse) -> None:
        assert warehouse.s3 is not None
        self._access = warehouse.s3
        self._client: Any = None

    def _s3(self):
        if self._client is None:
            self._client = self._access.client()
        return self._client

    def _split(self, uri: str) -> tuple[str, str]:
        bucket, _, key = object_uri(uri).split("://", 1)[1].partition("/")
        if bucket != self._access.bucket:
            raise RatuiError("RAT-RPR-001", f"{uri} is not in the warehouse's bucket '{self._access.bucket}'")
        return bucket, key

    def listing(self, root: str) -> Iterator[Listed]:
        bucket, prefix = self._split(root.rstrip("/") + "/")
        scheme = object_uri(root).split("://", 1)[0]
        try:
            pages = self._s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            objects = [o for page in pages for o in page.get("Contents", [])]
        except Exception as exc:
            raise self._access.error(exc, "list the warehouse's objects", root) from None
        for obj in sorted(objects, key=lambda o: o["Key"]):
            rel = obj["Key"][len(prefix):]
            if not rel or rel.endswith("/"):
                continue  # a folder marker (S3A and pyarrow write some): not a file of any table
            yield Listed(tuple(rel.split("/")[:-1]) or (".",), f"{scheme}://{bucket}/{obj['Key']}", int(obj["Size"]),
                         obj["LastModified"].timestamp())

    def stat(self, path: str) -> tuple[int, float] | None:
        bucket, key = self._split(path)
        try:
            head = self._s3().head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return None
            raise self._access.error(exc, "check an object before deleting it", path) from None
        return int(head["ContentLength"]), head["LastModified"].timestamp()

    def inside(self, path: str, root: str) -> bool:
        return object_uri(path).startswith(object_uri(root).rstrip("/") + "/")

    def delete(self, path: str) -> bool:
        bucket, key = self._split(path)
        try:
            self._s3().delete_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return False
            raise self._access.error(exc, "delete an orphan object", path) from None
        return True

    def tidy(self, path: str, stop_at: Iterable[str], whole_folder: bool = False) -> None:
        """Nothing: a bucket has no folders, only keys (a "folder" ends with its last object)."""


def _missing(exc: BaseException) -> bool:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound")


LOCAL = LocalStore()


def remove_empty_parents(folder: Path, stop_at: Iterable[Path], keep: Callable[[Path], bool] | None = None,
                         names: Iterable[str] = KEEP_FOLDERS) -> None:
    stops = {os.path.realpath(p) for p in stop_at}
    kept_names = set(names)
    folder = Path(folder)
    while str(folder) not in stops and folder.name not in kept_names and not (keep and keep(folder)):
        if folder.parent == folder:
            return
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            return
        folder = folder.parent
