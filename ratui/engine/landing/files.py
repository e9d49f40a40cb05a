"""A landing file as a run reads it: its name in the ledger, what Spark reads, and its bytes for the cheap checks.

Three kinds, one interface (landing/reader.py and formats/ never ask which):

    a local file            `path`: the zone's own file, or a copy staged on this disk; Spark reads the path
    an object read in place `source`: the object as listed (s3.py S3Object); Spark reads `spark_uri` straight from
                            the bucket, and the byte checks read ranged GETs pinned to the listed ETag (or
                            version): only the bytes they need, never a download of the whole object
    a copy Spark can reach  `path` for the bytes and `spark_uri` for Spark: a local file uploaded where a Spark that
                            cannot see this disk reads it (the run's staging prefix in the warehouse's bucket)
    a downloaded object     `path` (the copy), `origin` (the object's URI) and `pinned` (the identity it was
                            fetched as)

A file's identity (what makes a pass over it give the same answer: reader.py's memos) is its path, size, time and
inode when local, and the object's URI, size, ETag and version as listed when it is an object (read in place, or
downloaded pinned to that ETag: a rerun's new copy of the same object is the same file), with no request.
"""

from __future__ import annotations

import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol

from ratui.engine.errors import RatuiError

TAIL_BLOCK = 64 << 10  # what one request near an object's end fetches: a Parquet footer is read from it (Arrow
# reads the last 64 KB first too)


class ObjectBytes(Protocol):
    """An object's bytes exactly as listed: every read is pinned to the listed ETag or version, and one that no
    longer matches raises a coded error (RAT-S3-004)."""

    @property
    def size(self) -> int: ...

    @property
    def uri(self) -> str: ...

    @property
    def identity(self) -> tuple: ...

    def read(self, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer at the end)."""

    def lines(self) -> Iterator[bytes]:
        """The object's lines, each with its line end, streamed."""


@dataclass(frozen=True)
class ZoneFile:
    """One file to read: where it is, its name in the ledger (relative to the zone), and what Spark reads."""

    path: Path | None
    name: str
    origin: str | None = None  # where the file really is when `path` is a copy (an s3:// URI), or the object's
    source: ObjectBytes | None = None  # the object itself, read in place
    spark_uri: str | None = None  # what Spark reads when it is not `path` (the object, or an uploaded copy)
    pinned: tuple | None = None  # a downloaded object's identity as listed (the bytes `path` holds)
    _head: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @property
    def where(self) -> str:
        """What an error names: the object's URI for an object or a staged copy of one, else the file."""
        return self.origin or (self.source.uri if self.source is not None else str(self.path))

    @property
    def in_place(self) -> bool:
        """Read where it is in object storage (no copy on this disk)."""
        return self.path is None

    @property
    def size(self) -> int:
        if self.source is not None:
            return self.source.size
        assert self.path is not None
        return self.path.stat().st_size

    @property
    def identity(self) -> tuple:
        """What a pass over the file depends on: see the module's docstring."""
        if self.source is not None:
            return self.source.identity
        if self.pinned is not None:
            return self.pinned
        assert self.path is not None
        st = self.path.stat()
        return (str(self.path), st.st_size, st.st_mtime_ns, st.st_ino)

    def head(self, limit: int) -> bytes:
        """The first `limit` bytes (all of a smaller file); an object's are fetched once and kept."""
        if self.source is None:
            assert self.path is not None
            with self._open() as fh:
                return fh.read(limit)
        known = self._head.get("bytes")
        if known is None or (len(known) < limit and self._head.get("limit", 0) < limit):
            known = self.source.read(0, limit)
            self._head.update(bytes=known, limit=limit)
        return known[:limit]

    def read_bytes(self) -> bytes:
        """The whole file (callers check its size first)."""
        if self.source is None:
            assert self.path is not None
            with self._open() as fh:
                return fh.read()
        known = self._whole()
        return known if known is not None else self.source.read(0, self.source.size)

    def lines(self) -> Iterator[bytes]:
        """The file's lines with their line ends (a bad row's line number is found by reading them)."""
        if self.source is not None:
            known = self._whole()
            yield from (io.BytesIO(known) if known is not None else self.source.lines())
            return
        assert self.path is not None
        with self._open() as fh:
            yield from fh

    def _open(self) -> Any:
        """The local file, opened for reading; one this user may not read (or gone) is RAT-LND-008 naming it."""
        assert self.path is not None
        try:
            return open(self.path, "rb")
        except OSError as exc:
            raise RatuiError("RAT-LND-008", f"landing file '{self.name}' cannot be read: {exc.strerror or exc}",
                             file=self.where) from None

    def _whole(self) -> bytes | None:
        """An object's bytes when its head already held all of them."""
        known = self._head.get("bytes")
        return known if known is not None and self.source is not None and len(known) == self.source.size else None

    def open_random(self) -> Any:
        """A seekable binary file for a reader that jumps around (pyarrow reading a Parquet footer): the file, or
        the object through ranged reads."""
        if self.source is None:
            assert self.path is not None
            return self._open()
        return io.BufferedReader(RangedFile(self.source), buffer_size=8 << 10)


def prefetch_heads(files: Iterable[ZoneFile], limit: int, workers: int = 8) -> None:
    """Fetch the first bytes of the objects among `files` `workers` at a time (the checks then read them from
    memory): one request per object, in parallel, rather than one after another."""
    objects = [zf for zf in files if zf.source is not None and "bytes" not in zf._head]
    if len(objects) < 2:
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(objects)), thread_name_prefix="ratui-head") as pool:
        for _ in pool.map(lambda zf: zf.head(limit), objects):
            pass


class RangedFile(io.RawIOBase):
    """An object as a seekable read-only file: each read is a ranged request, except that a read within the last
    TAIL_BLOCK bytes fetches that whole block once (a Parquet footer and its magic bytes: one request)."""

    def __init__(self, source: ObjectBytes):
        super().__init__()
        self._source = source
        self._pos = 0
        self._block: tuple[int, bytes] | None = None
        self._lock = threading.Lock()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._source.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        size = self._source.size
        want = min(len(buffer), max(0, size - self._pos))
        if want == 0:
            return 0
        with self._lock:
            data = self._cached(self._pos, want)
            if data is None:
                tail = max(0, size - TAIL_BLOCK)
                if self._pos >= tail:
                    self._block = (tail, self._source.read(tail, size - tail))
                    data = self._cached(self._pos, want)
                else:
                    data = self._source.read(self._pos, want)
        assert data is not None
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def _cached(self, start: int, length: int) -> bytes | None:
        if self._block is None:
            return None
        begin, data = self._block
        if begin <= start and start + length <= begin + len(data):
            return data[start - begin:start - begin + length]
        return None
