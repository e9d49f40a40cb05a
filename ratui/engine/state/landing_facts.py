"""Which landing files a table's rows came from, carried by the table itself.

Each snapshot a run writes names, in its Iceberg summary, the landing files the run read:

    ratui.landing = [{"zone": "orders", "name": "orders_1.csv", "size": 1200, "mtime_ns": ..., "digest": "...",
                      "etag": null, "version": null}, ...]
    ratui.run-id  = the run

The facts travel with the data: a branch carries them, a merge (on either catalog) hands them on with the table's
metadata, a rollback takes them back with the rows. So every installation sharing a catalog (two checkouts of one
project on one Nessie) learns what the others loaded at its next run, before it chooses files (Ledger.learn), and
a process killed between a Nessie merge and its own ledger write loses nothing: the next run reads the facts back.

`since(table, synced)` walks a table's snapshot ancestry from its current snapshot back to the first snapshot the
ledger has already taken in (every older one was taken in with it), collecting the facts on the way.

A snapshot may also record the columns of the zones its run read, as Spark read them (StructType JSON, so
`createDataFrame([], schema)` gives the same Spark types), under

    ratui.landing-columns = {"orders": {"type": "struct", "fields": [...]}, ...}

A run with no row to read of a zone (nothing new) takes the zone's columns from the newest snapshot of the table's
ancestry that records them (`recorded_columns`) instead of reading a file for them: what travels with the data
travels with a branch, a merge and a rollback, and reaches another installation sharing the catalog. A run records
a zone's columns only when its table's ancestry does not already record the same ones (or the run rebuilds the
table), so the table's metadata grows by one schema per change of a zone's columns, not per run.

A file is the same file when its name, zone and size match and then its digest (local files up to
landing/local.py DIGEST_MAX_BYTES: a copy in another checkout has another modification time), else its ETag and
version (an object), else its modification time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable

PROPERTY = "ratui.landing"
RUN_PROPERTY = "ratui.run-id"
COLUMNS_PROPERTY = "ratui.landing-columns"


@dataclass(frozen=True)
class LandingFact:
    zone: str
    name: str  # the file's own name (at the zone's root when it was read)
    size: int
    mtime_ns: int
    digest: str | None = None
    etag: str | None = None
    version: str | None = None
    run_id: str | None = None  # filled in from the snapshot, not stored per file
    at: str | None = None  # the snapshot's time (ISO, UTC)

    def same_file(self, size: int, mtime_ns: int, digest: str | None, etag: str | None,
                  version: str | None) -> bool:
        """Whether a ledger row's identity is this file's (see the module docstring)."""
        if size != self.size:
            return False
        if digest and self.digest:
            return digest == self.digest
        if etag or self.etag:
            return etag == self.etag and version == self.version
        return mtime_ns == self.mtime_ns


def summary(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The snapshot-summary property naming these files (dicts with zone, name, size, mtime_ns, digest, etag,
    version); empty when there are none."""
    facts = [{k: row.get(k) for k in ("zone", "name", "size", "mtime_ns", "digest", "etag", "version")}
             for row in rows]
    return {PROPERTY: json.dumps(facts, separators=(",", ":"), sort_keys=True)} if facts else {}


@dataclass(frozen=True)
class ZoneColumns:
    """A zone's columns as a snapshot records them: Spark's schema as JSON (a StructType's jsonValue), the run
    that wrote the snapshot and the snapshot's time (ISO, UTC)."""

    schema: dict
    run_id: str | None = None
    at: str | None = None


def columns_summary(columns: dict[str, dict]) -> dict[str, str]:
    """The snapshot-summary property recording these zones' columns ({zone: StructType JSON}); empty for none."""
    return {COLUMNS_PROPERTY: json.dumps(columns, separators=(",", ":"), sort_keys=True)} if columns else {}


def recorded_columns(table: Any, zones: Iterable[str]) -> dict[str, ZoneColumns]:
    """The columns of each of `zones` as the newest snapshot of `table`'s ancestry that records them (walked from
    its current snapshot back, until every zone is found or the ancestry ends); a zone none records is absent."""
    metadata = table.metadata
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    wanted = set(zones)
    found: dict[str, ZoneColumns] = {}
    current = metadata.current_snapshot_id
    while current is not None and current in by_id and wanted - set(found):
        snapshot = by_id[current]
        props: dict[str, str] = dict(getattr(getattr(snapshot, "summary", None), "additional_properties", None) or {})
        text = props.get(COLUMNS_PROPERTY)
        try:
            recorded = json.loads(text) if text else {}
        except ValueError:
            recorded = {}
        for zone, schema in (recorded.items() if isinstance(recorded, dict) else ()):
            if zone in wanted and zone not in found and isinstance(schema, dict) and schema.get("type") == "struct":
                at = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, timezone.utc).isoformat(timespec="seconds")
                found[zone] = ZoneColumns(schema, props.get(RUN_PROPERTY), at)
        current = snapshot.parent_snapshot_id
    return found


def facts_of(snapshot: Any) -> list[LandingFact]:
    """The facts one snapshot carries (none for a snapshot ratui's runs did not write, or one it cannot read)."""
    props: dict[str, str] = dict(getattr(getattr(snapshot, "summary", None), "additional_properties", None) or {})
    text = props.get(PROPERTY)
    if not text:
        return []
    try:
        items = json.loads(text)
    except ValueError:
        return []
    at = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, timezone.utc).isoformat(timespec="microseconds")
    run_id = props.get(RUN_PROPERTY)
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("size"), int):
            out.append(LandingFact(str(item.get("zone")), item["name"], item["size"], int(item.get("mtime_ns") or 0),
                                   item.get("digest"), item.get("etag"), item.get("version"), run_id, at))
    return out


def since(table: Any, synced: set[int]) -> tuple[list[int], list[LandingFact]]:
    """Walk `table`'s ancestry from its current snapshot back to the first one in `synced`: (the snapshot ids
    walked, the facts they carry, oldest first)."""
    metadata = table.metadata
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    walked: list[int] = []
    found: list[list[LandingFact]] = []
    current = metadata.current_snapshot_id
    while current is not None and current not in synced and current in by_id:
        snapshot = by_id[current]
        walked.append(current)
        found.append(facts_of(snapshot))
        current = snapshot.parent_snapshot_id
    return walked, [fact for facts in reversed(found) for fact in facts]
