"""Responses of `ratui serve` checked against our own statement of the Iceberg REST catalog's response schemas.

The published OpenAPI document of the interface (apache/iceberg's rest-catalog-open-api.yaml) is not vendored here.
What stands in its place is written below by us, as JSON Schema 2020-12 dicts validated with jsonschema: the shapes
of the responses of the routes `ratui serve` answers (CatalogConfig, ListNamespacesResponse, CreateNamespaceResponse,
GetNamespaceResponse, UpdateNamespacePropertiesResponse, ListTablesResponse, LoadTableResult, CommitTableResponse and
the error model), their field names, types and required keys taken from PyIceberg's client models
(pyiceberg.catalog.rest: ConfigResponse, TableResponse, ListNamespaceResponse, ErrorResponse, ...; pyiceberg.table:
CommitTableResponse; pyiceberg.table.metadata: TableMetadataV1/V2/V3) and from Iceberg's table spec for the table
metadata (which keys each format version requires; schemas, partition specs, sort orders, snapshots, refs, logs).
Extra keys are allowed everywhere, as the interface allows them. The real clients are the other half of the check:
PyIceberg's RestCatalog parses every response with its models, DuckDB's iceberg extension reads and writes through
the endpoint (test_clients.py).

`check(method, path, status, body)` maps a path of ours (`/iceberg/REF/v1/...` is the interface's
`/v1/{prefix}/...`, the ref being our prefix in the URI) to its route template (ROUTES, written here), the status
to the route's response schema (an error status: the error model, whatever the route; a 204: no body), and
validates the JSON body.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import jsonschema

# ------------------------------------------------------------------------------------------------- the shapes

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}  # a string-to-string map (properties)
_INT = {"type": "integer"}
_NAMESPACE = {"type": "array", "items": {"type": "string"}}  # ["ecommerce", "silver"]

# a primitive type of the table spec, as its JSON names it
PRIMITIVE = (r"^(boolean|int|long|float|double|date|time|timestamp|timestamptz|timestamp_ns|timestamptz_ns|string"
             r"|uuid|binary|variant|unknown|fixed\[\d+\]|decimal\(\s*\d+\s*,\s*\d+\s*\)"
             r"|geometry(\(.*\))?|geography(\(.*\))?)$")
TRANSFORM = r"^(identity|year|month|day|hour|void|bucket\[\d+\]|truncate\[\d+\])$"
UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

DEFS: dict[str, Any] = {
    # -------------------------------------------------------------------- types and schemas (the table spec)
    "Type": {"oneOf": [{"type": "string", "pattern": PRIMITIVE},
                       {"$ref": "#/$defs/StructType"}, {"$ref": "#/$defs/ListType"}, {"$ref": "#/$defs/MapType"}]},
    "StructField": {
        "type": "object",
        "required": ["id", "name", "type", "required"],
        "properties": {"id": _INT, "name": {"type": "string"}, "type": {"$ref": "#/$defs/Type"},
                       "required": {"type": "boolean"}, "doc": {"type": "string"}},
    },
    "StructType": {
        "type": "object",
        "required": ["type", "fields"],
        "properties": {"type": {"const": "struct"}, "fields": {"type": "array",
                                                               "items": {"$ref": "#/$defs/StructField"}}},
    },
    "ListType": {
        "type": "object",
        "required": ["type", "element-id", "element", "element-required"],
        "properties": {"type": {"const": "list"}, "element-id": _INT, "element": {"$ref": "#/$defs/Type"},
                       "element-required": {"type": "boolean"}},
    },
    "MapType": {
        "type": "object",
        "required": ["type", "key-id", "key", "value-id", "value", "value-required"],
        "properties": {"type": {"const": "map"}, "key-id": _INT, "key": {"$ref": "#/$defs/Type"}, "value-id": _INT,
                       "value": {"$ref": "#/$defs/Type"}, "value-required": {"type": "boolean"}},
    },
    "Schema": {
        "allOf": [{"$ref": "#/$defs/StructType"}],
        "properties": {"schema-id": _INT, "identifier-field-ids": {"type": "array", "items": _INT}},
    },
    "PartitionField": {
        "type": "object",
        "required": ["field-id", "transform", "name"],
        "anyOf": [{"required": ["source-id"]}, {"required": ["source-ids"]}],  # v3: a transform of several columns
        "properties": {"field-id": _INT, "source-id": _INT, "source-ids": {"type": "array", "items": _INT},
                       "transform": {"type": "string", "pattern": TRANSFORM}, "name": {"type": "string"}},
    },
    "PartitionSpec": {
        "type": "object",
        "required": ["spec-id", "fields"],
        "properties": {"spec-id": _INT, "fields": {"type": "array", "items": {"$ref": "#/$defs/PartitionField"}}},
    },
    "SortField": {
        "type": "object",
        "required": ["transform", "direction", "null-order"],
        "anyOf": [{"required": ["source-id"]}, {"required": ["source-ids"]}],
        "properties": {"source-id": _INT, "source-ids": {"type": "array", "items": _INT},
                       "transform": {"type": "string", "pattern": TRANSFORM},
                       "direction": {"enum": ["asc", "desc"]}, "null-order": {"enum": ["nulls-first", "nulls-last"]}},
    },
    "SortOrder": {
        "type": "object",
        "required": ["order-id", "fields"],
        "properties": {"order-id": _INT, "fields": {"type": "array", "items": {"$ref": "#/$defs/SortField"}}},
    },
    # -------------------------------------------------------------------- snapshots, refs, logs, statistics
    "Snapshot": {
        "type": "object",
        "required": ["snapshot-id", "timestamp-ms", "manifest-list", "summary"],
        "properties": {
            "snapshot-id": _INT, "parent-snapshot-id": _INT, "sequence-number": _INT, "timestamp-ms": _INT,
            "manifest-list": {"type": "string"}, "schema-id": _INT, "first-row-id": _INT, "added-rows": _INT,
            "summary": {"type": "object", "required": ["operation"],
                        "properties": {"operation": {"enum": ["append", "replace", "overwrite", "delete"]}},
                        "additionalProperties": {"type": "string"}},
        },
    },
    "SnapshotRef": {
        "type": "object",
        "required": ["type", "snapshot-id"],
        "properties": {"type": {"enum": ["branch", "tag"]}, "snapshot-id": _INT,
                       "max-ref-age-ms": _INT, "max-snapshot-age-ms": _INT,
                       "min-snapshots-to-keep": {"type": "integer", "minimum": 1}},
    },
    "SnapshotLogEntry": {"type": "object", "required": ["snapshot-id", "timestamp-ms"],
                         "properties": {"snapshot-id": _INT, "timestamp-ms": _INT}},
    "MetadataLogEntry": {"type": "object", "required": ["metadata-file", "timestamp-ms"],
                         "properties": {"metadata-file": {"type": "string"}, "timestamp-ms": _INT}},
    "StatisticsFile": {
        "type": "object",
        "required": ["snapshot-id", "statistics-path", "file-size-in-bytes", "file-footer-size-in-bytes",
                     "blob-metadata"],
        "properties": {
            "snapshot-id": _INT, "statistics-path": {"type": "string"}, "file-size-in-bytes": _INT,
            "file-footer-size-in-bytes": _INT,
            "blob-metadata": {"type": "array", "items": {
                "type": "object", "required": ["type", "snapshot-id", "sequence-number", "fields"],
                "properties": {"type": {"type": "string"}, "snapshot-id": _INT, "sequence-number": _INT,
                               "fields": {"type": "array", "items": _INT}, "properties": _STRINGS}}},
        },
    },
    "PartitionStatisticsFile": {
        "type": "object",
        "required": ["snapshot-id", "statistics-path", "file-size-in-bytes"],
        "properties": {"snapshot-id": _INT, "statistics-path": {"type": "string"}, "file-size-in-bytes": _INT},
    },
    # -------------------------------------------------------------------- table metadata, by format version
    "TableMetadata": {
        "type": "object",
        "required": ["format-version", "table-uuid", "location", "last-updated-ms", "last-column-id"],
        "properties": {
            "format-version": {"enum": [1, 2, 3]},
            "table-uuid": {"type": "string", "pattern": UUID},
            "location": {"type": "string", "minLength": 1},
            "last-updated-ms": _INT,
            "last-column-id": _INT,
            "last-sequence-number": _INT,
            "next-row-id": _INT,
            "properties": _STRINGS,
            "schemas": {"type": "array", "minItems": 1,
                        "items": {"allOf": [{"$ref": "#/$defs/Schema"}, {"required": ["schema-id"]}]}},
            "current-schema-id": _INT,
            "schema": {"$ref": "#/$defs/Schema"},  # v1's single schema
            "partition-specs": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/PartitionSpec"}},
            "default-spec-id": _INT,
            "partition-spec": {"type": "array", "items": {"$ref": "#/$defs/PartitionField"}},  # v1's fields
            "last-partition-id": _INT,
            "sort-orders": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/SortOrder"}},
            "default-sort-order-id": _INT,
            "current-snapshot-id": _INT,
            "snapshots": {"type": "array", "items": {"$ref": "#/$defs/Snapshot"}},
            "refs": {"type": "object", "additionalProperties": {"$ref": "#/$defs/SnapshotRef"}},
            "snapshot-log": {"type": "array", "items": {"$ref": "#/$defs/SnapshotLogEntry"}},
            "metadata-log": {"type": "array", "items": {"$ref": "#/$defs/MetadataLogEntry"}},
            "statistics": {"type": "array", "items": {"$ref": "#/$defs/StatisticsFile"}},
            "partition-statistics": {"type": "array", "items": {"$ref": "#/$defs/PartitionStatisticsFile"}},
        },
        "allOf": [
            # v1: one schema and one spec's fields; the lists came later and are optional there
            {"if": {"properties": {"format-version": {"const": 1}}},
             "then": {"required": ["schema", "partition-spec"]}},
            # v2 and v3: everything a reader needs to find the current schema, spec and order, and the sequence
            {"if": {"properties": {"format-version": {"enum": [2, 3]}}},
             "then": {"required": ["last-sequence-number", "schemas", "current-schema-id", "partition-specs",
                                   "default-spec-id", "last-partition-id", "sort-orders", "default-sort-order-id"]}},
            {"if": {"properties": {"format-version": {"const": 3}}}, "then": {"required": ["next-row-id"]}},
        ],
    },
    # -------------------------------------------------------------------- the responses
    "CatalogConfig": {
        "type": "object",
        "required": ["defaults", "overrides"],
        "properties": {"defaults": _STRINGS, "overrides": _STRINGS,
                       "endpoints": {"type": "array", "items": {"type": "string", "pattern": r"^[A-Z]+ /\S+$"}}},
    },
    "ListNamespacesResponse": {
        "type": "object",
        "required": ["namespaces"],
        "properties": {"namespaces": {"type": "array", "items": _NAMESPACE},
                       "next-page-token": {"type": ["string", "null"]}},
    },
    "CreateNamespaceResponse": {
        "type": "object",
        "required": ["namespace"],
        "properties": {"namespace": _NAMESPACE, "properties": _STRINGS},
    },
    "GetNamespaceResponse": {
        "type": "object",
        "required": ["namespace"],
        "properties": {"namespace": _NAMESPACE, "properties": _STRINGS},
    },
    "UpdateNamespacePropertiesResponse": {
        "type": "object",
        "required": ["updated", "removed"],
        "properties": {"updated": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                       "removed": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                       "missing": {"type": ["array", "null"], "items": {"type": "string"}, "uniqueItems": True}},
    },
    "ListTablesResponse": {
        "type": "object",
        "required": ["identifiers"],
        "properties": {"identifiers": {"type": "array", "items": {
                           "type": "object", "required": ["namespace", "name"],
                           "properties": {"namespace": _NAMESPACE, "name": {"type": "string"}}}},
                       "next-page-token": {"type": ["string", "null"]}},
    },
    "LoadTableResult": {
        # the interface leaves metadata-location out for a staged create (nothing written yet)
        "type": "object",
        "required": ["metadata"],
        "properties": {
            "metadata-location": {"type": "string", "minLength": 1},
            "metadata": {"$ref": "#/$defs/TableMetadata"},
            "config": _STRINGS,
            "storage-credentials": {"type": "array", "items": {
                "type": "object", "required": ["prefix", "config"],
                "properties": {"prefix": {"type": "string"}, "config": _STRINGS}}},
        },
    },
    "LoadedTableResult": {
        # a table the catalog holds (GET): its metadata file exists, so its location is there
        "allOf": [{"$ref": "#/$defs/LoadTableResult"}, {"required": ["metadata-location"]}],
    },
    "CommitTableResponse": {
        "type": "object",
        "required": ["metadata-location", "metadata"],
        "properties": {"metadata-location": {"type": "string", "minLength": 1},
                       "metadata": {"$ref": "#/$defs/TableMetadata"}},
    },
    "ErrorResponse": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                           "code": {"type": "integer", "minimum": 400, "maximum": 600},
                           "stack": {"type": "array", "items": {"type": "string"}}},
        }},
    },
}

NO_BODY = None  # a 204: the response has no body

# (method, route template) -> {status: the schema's name in DEFS, or NO_BODY}; the routes of the interface that
# `ratui serve` answers. Any status >= 400 of any path is the error model; a status not listed here is a fault.
ROUTES: dict[tuple[str, str], dict[int, str | None]] = {
    ("GET", "/v1/config"): {200: "CatalogConfig"},
    ("GET", "/v1/{prefix}/namespaces"): {200: "ListNamespacesResponse"},
    ("POST", "/v1/{prefix}/namespaces"): {200: "CreateNamespaceResponse"},
    ("GET", "/v1/{prefix}/namespaces/{namespace}"): {200: "GetNamespaceResponse"},
    ("HEAD", "/v1/{prefix}/namespaces/{namespace}"): {204: NO_BODY},
    ("DELETE", "/v1/{prefix}/namespaces/{namespace}"): {204: NO_BODY},
    ("POST", "/v1/{prefix}/namespaces/{namespace}/properties"): {200: "UpdateNamespacePropertiesResponse"},
    ("GET", "/v1/{prefix}/namespaces/{namespace}/tables"): {200: "ListTablesResponse"},
    ("POST", "/v1/{prefix}/namespaces/{namespace}/tables"): {200: "LoadTableResult"},
    ("GET", "/v1/{prefix}/namespaces/{namespace}/tables/{table}"): {200: "LoadedTableResult"},
    ("HEAD", "/v1/{prefix}/namespaces/{namespace}/tables/{table}"): {204: NO_BODY},
    ("POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}"): {200: "CommitTableResponse"},
    ("DELETE", "/v1/{prefix}/namespaces/{namespace}/tables/{table}"): {204: NO_BODY},
    ("POST", "/v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics"): {204: NO_BODY},
    ("POST", "/v1/{prefix}/tables/rename"): {204: NO_BODY},
    ("POST", "/v1/{prefix}/transactions/commit"): {204: NO_BODY},
}
ENDPOINT = re.compile(r"(GET|HEAD|POST|PUT|DELETE) (/v1/\{prefix\}(/[a-z]+|/\{[a-z]+\})+)")


def schema(name: str) -> dict[str, Any]:
    """One shape of DEFS as a document of its own (its $refs resolve in it)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": f"#/$defs/{name}", "$defs": DEFS}


def _template(method: str, path: str) -> str | None:
    """Our request path as the route template of ROUTES it is, or None (not a route we answer)."""
    m = re.fullmatch(r"/iceberg/[^/]+(/v1/.*)", urlsplit(path).path)
    if m is None:
        return None
    rest = m.group(1)
    if rest == "/v1/config":
        return rest
    rest = "/v1/{prefix}" + rest[len("/v1"):]
    for verb, template in ROUTES:
        pattern = re.sub(r"\\\{[a-z]+\\\}", "[^/]+", re.escape(template.removeprefix("/v1/{prefix}")))
        if template != "/v1/config" and re.fullmatch(pattern, rest.removeprefix("/v1/{prefix}")) and \
                verb == method.upper():
            return template
    return None


def served_endpoints() -> set[str]:
    """What config's `endpoints` says the server serves (test_door.py checks config answers exactly this)."""
    from ratui.rest.routes import ENDPOINTS

    return set(ENDPOINTS)


def routes_of_the_interface() -> set[str]:
    """ROUTES as endpoint strings (`POST /v1/{prefix}/tables/rename`), config's own route left out."""
    return {f"{method} {template}" for method, template in ROUTES if template != "/v1/config"}


def response_schema(method: str, path: str, status: int) -> dict | None:
    """The schema of this response's body (None: a response without a body, like 204)."""
    if status >= 400:
        return schema("ErrorResponse")
    template = _template(method, path)
    assert template is not None, f"{method} {path} answered {status} but is not a route ratui serves"
    responses = ROUTES[(method.upper(), template)]
    assert status in responses, f"{method} {template}: status {status} is not one of its responses {set(responses)}"
    name = responses[status]
    return None if name is None else schema(name)


def _consistent(metadata: dict) -> None:
    """What a schema cannot say: the current ids name entries of the lists, refs and log point at snapshots."""
    schemas = {s.get("schema-id") for s in metadata.get("schemas", [])}
    if "current-schema-id" in metadata and schemas:
        assert metadata["current-schema-id"] in schemas, "current-schema-id is not one of schemas"
    specs = {s["spec-id"] for s in metadata.get("partition-specs", [])}
    if "default-spec-id" in metadata and specs:
        assert metadata["default-spec-id"] in specs, "default-spec-id is not one of partition-specs"
    orders = {s["order-id"] for s in metadata.get("sort-orders", [])}
    if "default-sort-order-id" in metadata and orders:
        assert metadata["default-sort-order-id"] in orders, "default-sort-order-id is not one of sort-orders"
    snapshots = {s["snapshot-id"] for s in metadata.get("snapshots", [])}
    current = metadata.get("current-snapshot-id")
    assert current in (None, -1) or current in snapshots, "current-snapshot-id is not one of snapshots"
    for name, ref in metadata.get("refs", {}).items():
        assert ref["snapshot-id"] in snapshots, f"ref {name!r} points at no snapshot of the table"


def check(method: str, path: str, status: int, body: Any) -> None:
    """Raise jsonschema.ValidationError (or AssertionError) when the response does not match its shape."""
    if method.upper() == "HEAD":
        assert body in (None, b"", ""), f"HEAD {path} {status}: a HEAD response has no body"
        if status < 400:
            response_schema(method, path, status)  # the route and status are the route's
        return
    found = response_schema(method, path, status)
    if found is None:
        assert body in (None, b"", ""), f"{method} {path} {status}: no body is expected, got {str(body)[:200]}"
        return
    jsonschema.Draft202012Validator(found).validate(body)
    if status >= 400:
        assert body["error"]["code"] == status, f"the error's code {body['error']['code']} is not the status {status}"
    elif isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        _consistent(body["metadata"])
