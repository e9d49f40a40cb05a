"""Nessie's trees as ratui reads and writes them: a ref's contents, one commit of several operations, the log.

Shared by the branch catalog (nessie.py) and the PyIceberg catalog of one ref (nessie_tables.py). Keys are ratui's
"namespace.layer.name" strings; on the wire they are Nessie key elements. ratui's facts about a commit (the `meta`
of base.Commit) travel as Nessie commit properties, `ratui.KEY`, so any Nessie client sees them in the log: a text
value as it is, any other value as JSON (its key listed in `ratui.json`). `ratui.ref` names the ref a commit was
made on (Nessie's commits do not belong to a ref), which is what base.Commit.ref and `log(own=True)` need.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Iterator

from ratui.engine.state.catalog.base import Commit, Pointer
from ratui.engine.state.catalog.nessie_http import NessieHttp, key_elements, key_of, path_key, ref_path

PREFIX = "ratui."
JSON_KEYS = "ratui.json"
REF_PROPERTY = "ratui.ref"
PAGE = 200
TABLE = "ICEBERG_TABLE"
NAMESPACE = "NAMESPACE"
RECORD_KEY = "ratui-record"  # see commit(): never a table key (those have 3 elements)
# The hash of Nessie's empty beginning: the parent of a ref's first commit (ratui's Commit.parent None).
NO_ANCESTOR = "2e1cfa82b035c26cbbbdae632cea070514eb8b773f616aaeaf668e2f0be8f10d"


# ------------------------------------------------------------------------------------------------ commit meta

def properties(ref: str, meta: dict | None) -> dict[str, str]:
    """ratui's meta of a commit as Nessie commit properties."""
    out = {REF_PROPERTY: ref}
    encoded = []
    for key, value in sorted((meta or {}).items()):
        if value is None:
            continue
        if isinstance(value, str):
            out[PREFIX + key] = value
        else:
            out[PREFIX + key] = json.dumps(value, sort_keys=True)
            encoded.append(key)
    if encoded:
        out[JSON_KEYS] = ",".join(encoded)
    return out


def meta_of(props: dict[str, str]) -> dict:
    encoded = set(filter(None, props.get(JSON_KEYS, "").split(",")))
    out: dict[str, Any] = {}
    for name, value in props.items():
        if not name.startswith(PREFIX) or name in (JSON_KEYS, REF_PROPERTY):
            continue
        key = name[len(PREFIX):]
        out[key] = json.loads(value) if key in encoded else value
    return out


def iso(nessie_time: str | None) -> str:
    """Nessie's instant (nanoseconds, 'Z') as ratui stores times: ISO-8601 UTC with microseconds."""
    if not nessie_time:
        return ""
    when = datetime.fromisoformat(nessie_time.replace("Z", "+00:00"))
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")


def nessie_time(iso_time: str) -> str:
    """ratui's ISO time as an instant Nessie's filters and `*timestamp` specs take ('Z', UTC)."""
    when = datetime.fromisoformat(iso_time)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


# ------------------------------------------------------------------------------------------------ refs and contents

def reference(api: NessieHttp, name: str) -> dict:
    """The ref {type, name, hash}; RAT-CAT-002 if absent."""
    return api.get(f"trees/{ref_path(name)}")["reference"]


def contents(api: NessieHttp, ref: str, hash: str | None = None) -> tuple[str, dict[str, dict]]:
    """(the hash read, key -> content) of every entry on the ref (namespaces included), at one commit."""
    out: dict[str, dict] = {}
    token = None
    at = hash
    while True:
        page = api.get(f"trees/{ref_path(ref, at)}/entries", content="true", max_records=PAGE, page_token=token)
        # every page is read at the hash the first one was: one consistent state even while the ref moves
        at = at or page["effectiveReference"]["hash"]
        for entry in page.get("entries") or []:
            content = entry.get("content") or {"type": entry.get("type"), "id": entry.get("contentId")}
            out[key_of(entry["name"]["elements"])] = content
        token = page.get("token")
        if not page.get("hasMore") or not token:
            return at, out


def references(api: NessieHttp) -> list[dict]:
    """Every reference on the server, branches and tags, other clients' as well as ratui's: {type, name, hash}."""
    found: list[dict] = []
    token = None
    while True:
        page = api.get("trees", fetch="MINIMAL", max_records=PAGE, page_token=token)
        found += page.get("references") or []
        token = page.get("token")
        if not page.get("hasMore") or not token:
            return found


def every_pointer(api: NessieHttp) -> list[Pointer]:
    """Every table of every reference (branches and tags, whoever made them), for the orphan-file sweep: one listing
    of the refs, then each ref's tables at the hash listed. A hash is immutable, so a ref that moves meanwhile is
    read as the listing saw it (the read is by hash alone, `@HASH`, so a ref deleted meanwhile is read too), and refs
    listed at one hash are read once. Nessie's listing is a scan of the refs, not a snapshot of them: a ref created
    (or moved) while it ran may be missing from it, so the refs are listed once more after the reads and what that
    second listing adds is read as well (marking more than needed keeps files; it never deletes one)."""
    tables: dict[str, dict[str, str]] = {}  # hash -> its table pointers
    seen: set[tuple[str, str]] = set()
    out: list[Pointer] = []
    for _ in range(2):
        for ref in references(api):
            name, hash = ref["name"], ref["hash"]
            if (name, hash) in seen:
                continue
            seen.add((name, hash))
            if hash not in tables:
                tables[hash] = pointers(contents(api, "", hash)[1])
            out.extend(Pointer(name, key, location) for key, location in sorted(tables[hash].items()))
    return out


def pointers(entries: dict[str, dict]) -> dict[str, str]:
    """The table pointers among a ref's entries: key -> metadata location (namespaces and views left out)."""
    return {key: c["metadataLocation"] for key, c in entries.items()
            if c.get("type") == TABLE and c.get("metadataLocation")}


def content(api: NessieHttp, ref: str, key: str) -> tuple[str, dict] | None:
    """(the ref's hash read, the content of `key`) or None when the ref has no such key."""
    from ratui.engine.errors import RatuiError

    try:
        found = api.get(f"trees/{ref_path(ref)}/contents/{path_key(key)}")
    except RatuiError as e:
        if e.code == "RAT-CAT-005":
            return None
        raise
    return found["effectiveReference"]["hash"], found["content"]


# ------------------------------------------------------------------------------------------------ commits

def put(key: str, value: dict) -> dict:
    return {"type": "PUT", "key": {"elements": key_elements(key)}, "content": value}


def remove(key: str) -> dict:
    return {"type": "DELETE", "key": {"elements": key_elements(key)}}


def table_content(metadata_location: str, metadata: Any, content_id: str | None) -> dict:
    """The ICEBERG_TABLE content of one Iceberg metadata file; `content_id` of the table it updates (None: new)."""
    snapshot = metadata.current_snapshot_id
    value = {"type": TABLE, "metadataLocation": metadata_location,
             "snapshotId": snapshot if snapshot is not None else -1, "schemaId": metadata.current_schema_id,
             "specId": metadata.default_spec_id, "sortOrderId": metadata.default_sort_order_id}
    if content_id:
        value["id"] = content_id
    return value


def namespace_puts(entries: dict[str, dict], keys: list[str]) -> list[dict]:
    """PUTs of the namespaces (and their parents) the tables `keys` need that the ref lacks: Nessie refuses a table
    whose namespace is absent."""
    needed: list[str] = []
    for key in keys:
        parts = key_elements(key)[:-1]
        for i in range(1, len(parts) + 1):
            name = key_of(parts[:i])
            if name not in entries and name not in needed:
                needed.append(name)
    return [put(name, {"type": NAMESPACE, "elements": key_elements(name)}) for name in needed]


def commit(api: NessieHttp, ref: str, expected: str, message: str, operations: list[dict],
           meta: dict | None = None) -> dict:
    """One Nessie commit of `operations` on branch `ref`, guarded by `expected` (the hash the caller read: Nessie
    refuses it if a key it touches changed after that hash). Returns Nessie's CommitResponse.

    Nessie refuses a commit of no operations; a commit that only records something (a branch's creation, ratui's
    meta after a write) carries one UNCHANGED operation on RECORD_KEY, a key no table has, which changes nothing
    and conflicts with nothing."""
    operations = operations or [{"type": "UNCHANGED", "key": {"elements": [RECORD_KEY]}}]
    body = {"commitMeta": {"message": message, "properties": properties(ref, meta)}, "operations": operations}
    return api.post(f"trees/{ref_path(ref, expected)}/history/commit", body)


def log_entries(api: NessieHttp, ref: str, hash: str | None = None, limit: int | None = None,
                filter: str | None = None) -> Iterator[dict]:
    """Log entries (with their operations) from the ref's head (or `hash`) back along first parents."""
    token = None
    served = 0
    while True:
        size = PAGE if limit is None else max(1, min(PAGE, limit - served))
        page = api.get(f"trees/{ref_path(ref, hash)}/history", fetch="ALL", max_records=size, page_token=token,
                       filter=filter)
        for entry in page.get("logEntries") or []:
            yield entry
            served += 1
            if limit is not None and served >= limit:
                return
        token = page.get("token")
        if not page.get("hasMore") or not token:
            return


def props_of(commit_meta: dict) -> dict[str, str]:
    """A commit's properties: API v2 answers `allProperties` (each a list of values), v1 `properties`."""
    every = commit_meta.get("allProperties")
    if every:
        return {k: v[0] for k, v in every.items() if v}
    return dict(commit_meta.get("properties") or {})


def to_commit(entry: dict, ref: str, tables: dict[str, str]) -> Commit:
    cm = entry["commitMeta"]
    props = props_of(cm)
    parent = entry.get("parentCommitHash")
    return Commit(cm["hash"], None if parent == NO_ANCESTOR else parent, props.get(REF_PROPERTY, ref),
                  cm.get("message") or "", iso(cm.get("commitTime")), dict(tables), meta_of(props))


def apply(tables: dict[str, str], operations: list[dict] | None) -> dict[str, str]:
    """The table pointers after one commit's operations."""
    out = dict(tables)
    for op in operations or []:
        key = key_of(op["key"]["elements"])
        if op["type"] == "DELETE":
            out.pop(key, None)
        elif op["type"] == "PUT" and (op.get("content") or {}).get("type") == TABLE:
            out[key] = op["content"]["metadataLocation"]
    return out
