"""What a ledger sync writes (ledger.py's Ledger.sync): whether anything changed at all (decided with sets, in C),
and if so, which rows to insert, update, retime or forget."""

from __future__ import annotations

from itertools import compress, repeat
from operator import itemgetter, not_
from typing import Any

from ratui.engine.landing.names import PROCESSED, is_archived_name
from ratui.engine.landing.zone import ZoneEntry

_LISTED = itemgetter(slice(0, 5))  # a ZoneEntry's identity: name, size, mtime_ns, etag, version
_KNOWN = itemgetter(0, 1, 2, -2, -1)  # a row of LedgerReads._read_brief(): file, size, mtime_ns, etag, version
_FILE, _DIGESTED = itemgetter(0), itemgetter(-3)


def unchanged(items: list[ZoneEntry], rows: list[tuple], forget_missing: bool) -> bool:
    """Whether a sync of `items` would write nothing, decided with sets built and compared in C (a zone of 100,000
    unchanged files in a fraction of SyncPlan's per-file loop): every listed file has a row with its size, time,
    ETag and version, a local one with a digest of its bytes kept (else SyncPlan decides: it digests); and with
    `forget_missing`, no row of an active file that is no longer listed. `rows`: as LedgerReads._read_brief() gives
    them."""
    if _same_in_order(items, rows):
        return True
    listed = set(map(_LISTED, items))
    known = set(map(_KNOWN, rows))
    if len(listed) != len(items) or not listed <= known:
        return False
    undigested = set(compress(map(_FILE, rows), map(not_, map(_DIGESTED, rows))))
    if undigested and any(item.is_local and item.name in undigested for item in items):
        return False
    if forget_missing:  # the listed names are active ones: equal counts mean no active row is missing
        archived = sum(map(str.startswith, map(_FILE, rows), repeat(PROCESSED + "/")))
        return len(listed) == len(rows) - archived
    return True


def _same_in_order(items: list[ZoneEntry], rows: list[tuple]) -> bool:
    """The common case of _unchanged (a local zone nobody touched) decided without a set: the active rows and the
    listing hold the same identities in the same order (a listing is sorted by name; Python's order of strings is
    SQLite's BINARY order of their UTF-8, the rows' order), and every row keeps a digest. False whenever anything
    differs, the order included: then the sets decide."""
    files = list(map(_FILE, rows))
    archived = list(map(str.startswith, files, repeat(PROCESSED + "/")))
    if any(archived):
        rows = list(compress(rows, map(not_, archived)))
    return (len(rows) == len(items) and all(map(_DIGESTED, rows))
            and list(map(_LISTED, items)) == list(map(_KNOWN, rows)))


class SyncPlan:
    """What a sync writes, from the listed items and the rows the ledger has (file -> (size, mtime_ns, digest,
    etag, version)): sets and dictionaries, one pass over each.

        retimed   [name, new mtime_ns, size, old mtime_ns]: a local file whose time alone changed (same digest):
                  its row keeps its state and takes the new time (an upsert too), so do its landing_loads rows
        upserts   [name, size, mtime_ns, digest, etag, version]: new files, changed ones, retimed ones, and rows
                  whose digest is to be updated; the upsert itself says which become unloaded (_CHANGED)
        gone      names no longer listed (forget_missing), archived ones kept
    """

    def __init__(self, items: list[ZoneEntry], digests: dict[str, str | None], known: dict[str, tuple],
                 forget_missing: bool, first_only: bool = False):
        """`first_only`: stop at the first thing to write (whether there is anything: the write transaction decides
        again on the rows as they are then)."""
        self.retimed: list[list[Any]] = []
        self.upserts: list[list[Any]] = []
        self.gone: list[str] = []
        for item in items:
            if first_only and self.upserts:
                return
            name, size, mtime_ns, etag, version, at = item  # a ZoneEntry's fields (`at`: None for an object)
            digest = digests.get(name)
            row = known.get(name)
            if row is None:
                self.upserts.append([name, size, mtime_ns, digest, etag, version])
                continue
            old_size, old_mtime, old_digest, old_etag, old_version = row
            if (at is not None and old_size == size and old_mtime != mtime_ns and old_digest
                    and digest == old_digest):
                self.retimed.append([name, mtime_ns, size, old_mtime])
                self.upserts.append([name, size, mtime_ns, digest, etag, version])  # _CHANGED keeps its state
                continue
            if (old_size, old_mtime, old_digest, old_etag, old_version) != (size, mtime_ns, digest, etag, version):
                self.upserts.append([name, size, mtime_ns, digest, etag, version])
        if forget_missing:
            listed = {item.name for item in items}
            self.gone = [name for name in known if name not in listed and not is_archived_name(name)]

    @property
    def empty(self) -> bool:
        return not (self.retimed or self.upserts or self.gone)

