"""The response checker (openapi.py) itself: it passes what PyIceberg writes and refuses what a client could not use.
No server, no Spark: table metadata as PyIceberg serializes it (what `ratui serve` answers), then broken copies."""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest

from tests.rest import openapi

TABLE = "/iceberg/main/v1/namespaces/demo/tables/orders"


def _metadata(format_version: int) -> dict:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import BucketTransform, DayTransform
    from pyiceberg.types import (DecimalType, ListType, LongType, MapType, NestedField, StringType, StructType,
                                 TimestamptzType)

    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "ts", TimestamptzType()),
                    NestedField(3, "tags", ListType(4, StringType(), element_required=False)),
                    NestedField(5, "prices", MapType(6, StringType(), 7, DecimalType(10, 2))),
                    NestedField(8, "who", StructType(NestedField(9, "name", StringType()))),
                    identifier_field_ids=[1])
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day"),
                         PartitionField(1, 1001, BucketTransform(4), "id_bucket"))
    metadata = new_table_metadata(schema, spec, SortOrder(SortField(1)), "s3://bucket/demo/orders",
                                  {"format-version": str(format_version)})
    return json.loads(metadata.model_dump_json())


def _with_a_snapshot(metadata: dict) -> dict:
    metadata = copy.deepcopy(metadata)
    metadata["snapshots"] = [{"snapshot-id": 7, "sequence-number": 1, "timestamp-ms": 1700000000000,
                              "manifest-list": "s3://bucket/demo/orders/metadata/snap-7.avro", "schema-id": 0,
                              "summary": {"operation": "append", "added-records": "3"}}]
    metadata["current-snapshot-id"] = 7
    metadata["refs"] = {"main": {"snapshot-id": 7, "type": "branch"}, "v1": {"snapshot-id": 7, "type": "tag"}}
    metadata["snapshot-log"] = [{"snapshot-id": 7, "timestamp-ms": 1700000000000}]
    metadata["metadata-log"] = [{"metadata-file": "s3://bucket/demo/orders/metadata/00000.json",
                                 "timestamp-ms": 1690000000000}]
    return metadata


def _refused(method: str, path: str, status: int, body, why: str) -> None:
    """`check` refuses the response, for the reason `why` (a part of its message)."""
    with pytest.raises((jsonschema.ValidationError, AssertionError), match=re.escape(why)):
        openapi.check(method, path, status, body)


@pytest.mark.parametrize("format_version", [1, 2])
def test_what_pyiceberg_writes_passes(format_version):
    metadata = _with_a_snapshot(_metadata(format_version))
    openapi.check("GET", TABLE, 200, {"metadata-location": "s3://bucket/m.json", "metadata": metadata, "config": {}})
    openapi.check("POST", TABLE, 200, {"metadata-location": "s3://bucket/m.json", "metadata": metadata})
    # a staged create has no metadata file yet
    openapi.check("POST", "/iceberg/main/v1/namespaces/demo/tables", 200, {"metadata": metadata, "config": {}})


def test_the_checker_refuses_what_a_client_could_not_use():
    metadata = _with_a_snapshot(_metadata(2))
    loaded = {"metadata-location": "s3://bucket/m.json", "metadata": metadata, "config": {}}
    # a loaded table without the location of its metadata file
    _refused("GET", TABLE, 200, {k: v for k, v in loaded.items() if k != "metadata-location"},
             "'metadata-location' is a required property")
    # an error without its code; an error whose code is not the status
    _refused("GET", TABLE, 404, {"error": {"message": "RAT-REST-005: no table", "type": "NoSuchTableException"}},
             "'code' is a required property")
    _refused("GET", TABLE, 404, {"error": {"message": "RAT-REST-005: no", "type": "NoSuchTableException",
                                           "code": 409}}, "the error's code 409 is not the status 404")
    # a schema field without its type
    broken = copy.deepcopy(loaded)
    del broken["metadata"]["schemas"][0]["fields"][1]["type"]
    _refused("GET", TABLE, 200, broken, "'type' is a required property")
    # ... or with a type the table spec has not, deep in a struct
    broken = copy.deepcopy(loaded)
    broken["metadata"]["schemas"][0]["fields"][4]["type"]["fields"][0]["type"] = "varchar"
    _refused("GET", TABLE, 200, broken, "is not valid under any of the given schemas")
    # a snapshot whose summary has no operation; a ref that is neither branch nor tag; a format version that does
    # not exist; a current schema that is not among the schemas
    for path, value, why in [(("snapshots", 0, "summary"), {"added-records": "3"}, "'operation' is a required"),
                             (("refs", "main", "type"), "head", "'head' is not one of ['branch', 'tag']"),
                             (("format-version",), 4, "4 is not one of [1, 2, 3]"),
                             (("current-schema-id",), 5, "current-schema-id is not one of schemas")]:
        broken = copy.deepcopy(loaded)
        *parents, last = path
        node = broken["metadata"]
        for key in parents:
            node = node[key]
        node[last] = value
        _refused("GET", TABLE, 200, broken, why)
    # a v2 table without its sequence number
    broken = copy.deepcopy(loaded)
    del broken["metadata"]["last-sequence-number"]
    _refused("GET", TABLE, 200, broken, "'last-sequence-number' is a required property")
    # a commit's answer must say where the new metadata file is
    _refused("POST", TABLE, 200, {"metadata": metadata}, "'metadata-location' is a required property")
    # a 204 has no body; a route not served answers only errors; a status a route does not answer is a fault
    _refused("DELETE", TABLE, 204, {"dropped": True}, "no body is expected")
    _refused("GET", "/iceberg/main/v1/namespaces/demo/views", 200, {"identifiers": []},
             "is not a route ratui serves")
    _refused("GET", TABLE, 201, loaded, "status 201 is not one of its responses")
    # namespaces are lists of strings; config's defaults are required
    _refused("GET", "/iceberg/main/v1/namespaces", 200, {"namespaces": ["demo"]}, "'demo' is not of type 'array'")
    _refused("GET", "/iceberg/main/v1/config", 200, {"overrides": {}, "endpoints": []},
             "'defaults' is a required property")
    openapi.check("GET", "/iceberg/main/v1/namespaces", 200, {"namespaces": [["demo"]]})


def test_every_endpoint_ratui_serves_has_its_shapes_here():
    assert openapi.served_endpoints() <= openapi.routes_of_the_interface()
    for endpoint in openapi.served_endpoints():
        assert openapi.ENDPOINT.fullmatch(endpoint), endpoint
