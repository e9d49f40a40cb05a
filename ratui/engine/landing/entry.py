"""A file of a landing zone as listed, and the identity the ledger and change detection compare."""

from __future__ import annotations

import gc
import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


@dataclass(frozen=True)
class ZoneEntry:
    """One file of a zone as listed: its name relative to the zone (`a.csv`, `_processed/RUN/a.csv`) and its
    identity. A local file also has its `path`; an object has its ETag (and version, on a versioned bucket)."""
    name: str
    size: int
    mtime_ns: int
    etag: str | None = None
    version: str | None = None
    path: Path | None = field(default=None, compare=False)

    @property
    def base_name(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @staticmethod
    def listed(name: str, size: int, mtime_ns: int, child: Callable[[str], Path]) -> "ZoneEntry":
        """A local file as a folder's listing makes it: equal to ZoneEntry(name, size, mtime_ns, path=child(name)),
        made without the frozen dataclass's __init__ (which sets each field through object.__setattr__), and its
        path made when first asked for. A listing of 100,000 files makes 100,000 entries; a sync that finds them
        unchanged asks none of them for its path."""
        entry = _new(ZoneEntry)
        entry.__dict__.update(name=name, size=size, mtime_ns=mtime_ns, etag=None, version=None, _child=child)
        return entry

    def __getattr__(self, name: str) -> Any:
        """Only a listed entry's path is not in its __dict__ until asked for (there is no class attribute `path`:
        see below): made from its folder's `_child` once, then kept."""
        if name != "path":
            raise AttributeError(name)
        child = self.__dict__.get("_child")
        path = child(self.__dict__["name"]) if child is not None else None
        self.__dict__["path"] = path
        return path


# The dataclass keeps `path`'s default (None) in its __init__; without the class attribute it also sets, an entry
# made by ZoneEntry.listed finds its path through __getattr__.
del ZoneEntry.path
_new = object.__new__


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
