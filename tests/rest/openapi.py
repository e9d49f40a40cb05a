"""Responses of `ratui serve` checked against the Iceberg REST catalog's OpenAPI document (a copy beside this file:
rest-catalog-open-api.yaml, from apache/iceberg).

`check(method, path, status, body)` finds the spec's operation for a path of ours (`/iceberg/REF/v1/...` is the
spec's `/v1/{prefix}/...`, the ref being our prefix in the URI), its response for the status (or the spec's 4XX/5XX,
or its error shape for a status the operation does not list: every error must be an IcebergErrorResponse), and
validates the JSON body against that schema with jsonschema (OpenAPI 3.1 schemas are JSON Schema 2020-12), the
spec's own $refs resolved in the document.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_FILE = Path(__file__).with_name("rest-catalog-open-api.yaml")
BASE = "urn:iceberg-rest-spec"


@functools.cache
def spec() -> dict:
    return yaml.safe_load(SPEC_FILE.read_text())


@functools.cache
def _registry() -> Registry:
    return Registry().with_resource(BASE, Resource.from_contents(spec(), default_specification=DRAFT202012))


def node_ref_parts(ref: str) -> list[str]:
    assert ref.startswith("#/"), ref
    return ref[2:].split("/")


def _deref(node: dict) -> dict:
    while "$ref" in node:
        target = spec()
        for part in node_ref_parts(node["$ref"]):
            target = target[part]
        node = target
    return node


def _template(path: str) -> str | None:
    """Our request path as the spec's path template."""
    path = urlsplit(path).path
    m = re.fullmatch(r"/iceberg/[^/]+(/v1/.*)", path)
    assert m, f"not a catalog path: {path}"
    rest = m.group(1)
    rest = "/v1/config" if rest == "/v1/config" else "/v1/{prefix}" + rest[len("/v1"):]
    for template in spec()["paths"]:
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        pattern = pattern.replace(re.escape("{prefix}"), "[^/]+")
        if re.match(pattern, rest.replace("/v1/{prefix}", "/v1/P")):
            return template
    return None


def served_endpoints() -> set[str]:
    """What config's `endpoints` says the server serves (test_door.py checks config answers exactly this)."""
    from ratui.rest.routes import ENDPOINTS

    return set(ENDPOINTS)


def response_schema(method: str, path: str, status: int) -> dict | None:
    """The schema the spec gives the body of this response (None: a response without a body, like 204)."""
    template = _template(path)
    error = {"$ref": "#/components/schemas/IcebergErrorResponse"}
    if template is None:  # a route the spec does not have: only the error shape applies
        assert status >= 400, f"{method} {path} answered {status} but is not a route of the spec"
        return error
    operation = spec()["paths"][template].get(method.lower())
    if f"{method.upper()} {template}" not in served_endpoints() and template != "/v1/config":
        # a route the server does not list in config's `endpoints` (views, say): it answers the error shape only
        assert status >= 400, f"{method} {template} is not served, yet answered {status}"
        return error
    if operation is None:
        assert status >= 400, f"{method} {template} is not in the spec, yet answered {status}"
        return error
    responses = operation["responses"]
    response = responses.get(status) or responses.get(str(status)) or responses.get(f"{str(status)[0]}XX") or \
        responses.get("default")
    if response is None:
        assert status >= 400, f"{method} {template}: status {status} is not a response of the spec"
        return error
    content = _deref(response).get("content")
    if not content:
        return None
    return content["application/json"]["schema"]


def check(method: str, path: str, status: int, body) -> None:
    """Raise jsonschema.ValidationError (or AssertionError) when the response does not match the spec."""
    schema = response_schema(method, path, status)
    if schema is None:
        assert body in (None, b"", ""), f"{method} {path} {status}: the spec gives no body, got {str(body)[:200]}"
        return
    if method.upper() == "HEAD":
        return  # a HEAD response carries no body whatever its status
    wrapped = {"$ref": BASE + schema["$ref"]} if "$ref" in schema else schema
    jsonschema.Draft202012Validator(wrapped, registry=_registry()).validate(body)
