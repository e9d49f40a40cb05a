"""A file of a landing zone as listed, and the identity the ledger and change detection compare."""

from __future__ import annotations

import gc
import hashlib
import json
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple


class _Fields(NamedTuple):
    name: str
    size: int
    mtime_ns: int
    etag: str | None = None
    version: str | None = None
    at: Any = None  # the local file's Path, or (a listed file) its folder's child maker; None for an object


class ZoneEntry(_Fields):
    """One file of a zone as listed: its name relative to the zone (`a.csv`, `_processed/RUN/a.csv`) and its
    identity (size, modification time, and for an object its ETag and version, on a versioned bucket). A local
    file also has its `path`.

    A tuple, not a dataclass: a listing of 100,000 files makes 100,000 entries, and the ledger reads five fields of
    each on every sync. A tuple is made in C (listed_entry) and is one block of memory whose fields are read
    through C descriptors: the ledger's check of an unchanged 100,000-file zone took a third of the time it took
    with frozen dataclass objects (each with a __dict__). Two entries are equal when their names and identities
    are (the path is not compared); compare them only with ZoneEntries."""
    __slots__ = ()

    def __new__(cls, name: str, size: int, mtime_ns: int, etag: str | None = None, version: str | None = None,
                path: Path | None = None) -> "ZoneEntry":
        return tuple.__new__(cls, (name, size, mtime_ns, etag, version, path))

    @property
    def path(self) -> Path | None:
        """The local file's path (a listed one's is made when asked for: a sync that finds a zone unchanged asks
        none of them)."""
        at = self[5]
        return at(self[0]) if callable(at) else at

    @property
    def is_local(self) -> bool:
        """A local file (it has a path), told without making the path."""
        return self[5] is not None

    @property
    def base_name(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    def __eq__(self, other: object) -> bool:
        if type(other) is not ZoneEntry:
            return NotImplemented
        return self[:5] == other[:5]  # type: ignore[index]

    def __ne__(self, other: object) -> bool:
        if type(other) is not ZoneEntry:
            return NotImplemented
        return self[:5] != other[:5]  # type: ignore[index]

    def __hash__(self) -> int:
        return hash(self[:5])

    def __repr__(self) -> str:
        return (f"ZoneEntry(name={self.name!r}, size={self.size!r}, mtime_ns={self.mtime_ns!r}, etag={self.etag!r}, "
                f"version={self.version!r}, path={self.path!r})")

    def __getnewargs__(self) -> tuple:  # pickled with its path, not a listing's child maker
        return (*self[:5], self.path)


# A local file as a folder's listing makes it, in C: listed_entry((name, size, mtime_ns, None, None, child)) equals
# ZoneEntry(name, size, mtime_ns, path=child(name)), its path made from `child` when asked for
listed_entry = partial(tuple.__new__, ZoneEntry)


Progress = Callable[[int, int, int], None]  # (files staged, of how many, bytes so far)


def entry_of(item: Any) -> ZoneEntry:
    """A ZoneEntry for a local Path (stat'ed now) or anything with name/size/mtime_ns (an entry already)."""
    if isinstance(item, ZoneEntry):
        return item
    if isinstance(item, Path):
        st = item.stat()
        return ZoneEntry(item.name, st.st_size, st.st_mtime_ns, path=item)
    return ZoneEntry(item.name, item.size, item.mtime_ns, getattr(item, "etag", None), getattr(item, "version", None))


# a run records its zones' digests (run history `inputs`) file by file up to this many files; a larger zone's is
# recorded as its file count and a hash: 100,000 files would be megabytes per run, read at every decision
RECORDED_FILES_UP_TO = 1000


def recorded_digest(digest: list[list[Any]]) -> list[list[Any]] | dict[str, Any]:
    """A zone digest as a run records it: the digest itself, or for a large zone {"files": N, "sha256": ...}."""
    if len(digest) <= RECORDED_FILES_UP_TO:
        return digest
    text = json.dumps(digest, separators=(",", ":"))
    return {"files": len(digest), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def same_digest(recorded: Any, digest: list[list[Any]]) -> bool:
    """Whether a recorded digest (either form) is that of `digest`."""
    if isinstance(recorded, dict):
        return recorded == recorded_digest(digest) if len(digest) > RECORDED_FILES_UP_TO else False
    return recorded == digest


def zone_digest(files: Iterable[Any]) -> list[list[Any]]:
    """What change detection compares: the active files with their size and modification time (and, for
    objects, their ETag and version)."""
    out = []
    with paused_gc():
        for item in files:
            if isinstance(item, ZoneEntry):
                e = item
            else:
                try:
                    e = entry_of(item)
                except FileNotFoundError:
                    continue
            out.append([e.name, e.size, e.mtime_ns] if e.etag is None else [e.name, e.size, e.mtime_ns, e.etag,
                                                                             e.version])
        out.sort()
    return out


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a zone's listing, or the ledger's comparison with it,
    allocates a few hundred thousand objects that hold no cycles (a zone of 100,000 files): each full collection
    would walk all of them again. Reference counting still frees everything at once; the collector runs as usual
    afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
