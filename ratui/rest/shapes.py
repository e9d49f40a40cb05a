"""The Iceberg REST catalog's wire shapes (apache/iceberg open-api/rest-catalog-open-api.yaml), and how ratui's
coded errors travel in them.

Every refusal is `{"error": {"message, "type", "code"}}`: `type` is the exception name Iceberg clients map to their
own errors (NoSuchTableException, CommitFailedException, ...), `code` the HTTP status, and the message starts with
ratui's code (`RAT-REST-005: table ...`) so a user can look it up. A message never holds a token or a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

from pydantic import BaseModel, ValidationError

from ratui.engine.errors import RatuiError

NAMESPACE_SEPARATOR = "\x1f"  # the spec's default separator of a multi-part namespace in a path (%1F)
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,127}")  # one part of a namespace, or a table name

# ratui's codes of the catalog that a request can meet, as (HTTP status, Iceberg exception type)
_CATALOG_CODES = {
    "RAT-CAT-001": (409, "AlreadyExistsException"),
    "RAT-CAT-002": (404, "NoSuchNamespaceException"),  # an unknown ref: nothing of it exists
    "RAT-CAT-003": (409, "CommitFailedException"),  # another writer moved a table first
    "RAT-CAT-005": (404, "NoSuchTableException"),
    "RAT-CAT-007": (403, "ForbiddenException"),  # a past state written to
    "RAT-CAT-010": (404, "NoSuchNamespaceException"),  # no such commit
}


@dataclass
class RestError(Exception):
    """A refusal in the Iceberg REST shape; `code` is ratui's (errors.yaml), `kind` Iceberg's exception type."""

    status: int
    kind: str
    code: str
    message: str

    def __post_init__(self) -> None:
        RatuiError(self.code, self.message)  # an unregistered code fails here, in the tests, not in a client
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": f"{self.code}: {self.message}", "type": self.kind, "code": self.status}}


def from_ratui(error: RatuiError, *, table_route: bool = False) -> RestError:
    """A coded engine error as the REST error a client understands (an unknown ref on a table's route is a
    NoSuchTableException: that is what a client asked for)."""
    status, kind = _CATALOG_CODES.get(error.code, (400, "BadRequestException"))
    if table_route and status == 404:
        kind = "NoSuchTableException"
    if error.code.startswith(("RAT-NES", "RAT-PRJ", "RAT-S3")):
        status, kind = 503, "ServiceUnavailableException"
    return RestError(status, kind, error.code, error.message)


# -------------------------------------------------------------------------------------------- the common refusals

def bad_request(message: str) -> RestError:
    return RestError(400, "BadRequestException", "RAT-REST-008", message)


def bad_name(message: str) -> RestError:
    return RestError(400, "BadRequestException", "RAT-REST-009", message)


def no_namespace(namespace: tuple[str, ...], ref: str) -> RestError:
    return RestError(404, "NoSuchNamespaceException", "RAT-REST-004",
                     f"namespace '{'.'.join(namespace)}' does not exist on '{ref}'")


def no_table(key: str, ref: str) -> RestError:
    return RestError(404, "NoSuchTableException", "RAT-REST-005", f"table '{key}' does not exist on '{ref}'")


def read_only(ref: str, why: str) -> RestError:
    return RestError(403, "ForbiddenException", "RAT-REST-006", f"'{ref}' is read-only here: {why}")


def already_exists(what: str) -> RestError:
    return RestError(409, "AlreadyExistsException", "RAT-REST-013", f"{what} already exists")


def unsupported(what: str) -> RestError:
    return RestError(406, "UnsupportedOperationException", "RAT-REST-015", f"{what} is not supported by ratui's "
                                                                          "Iceberg REST catalog")


# -------------------------------------------------------------------------------------------------- path parts

def segment(raw: str) -> str:
    """One path segment as sent, URL-decoded (a ref `dev%2Falice` is `dev/alice`)."""
    return unquote(raw, errors="strict")


def namespace_of(raw: str) -> tuple[str, ...]:
    """A namespace path parameter: its parts separated by %1F (or the old clients' '.'-free single part)."""
    parts = tuple(segment(raw).split(NAMESPACE_SEPARATOR))
    return checked_namespace(parts)


def checked_namespace(parts: Any) -> tuple[str, ...]:
    if not isinstance(parts, (list, tuple)) or not parts or len(parts) > 8:
        raise bad_name("a namespace is a list of 1 to 8 names")
    for part in parts:
        if not isinstance(part, str) or not NAME_RE.fullmatch(part):
            raise bad_name(f"namespace part {str(part)[:60]!r} is not a name (letters, digits, _ and -; no '.', "
                           "'/' or '..')")
    return tuple(parts)


def checked_table_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise bad_name(f"table name {str(name)[:60]!r} is not a name (letters, digits, _ and -; no '.', '/' or '..')")
    return name


def table_key(namespace: tuple[str, ...], name: str) -> str:
    return ".".join((*namespace, name))


# -------------------------------------------------------------------------------------------------- bodies

Model = TypeVar("Model", bound=BaseModel)


def parse_json(raw: bytes) -> Any:
    if not raw:
        raise bad_request("the request has no body; a JSON object is expected")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body is not JSON: {str(exc)[:120]}") from None


def parse_model(model: type[Model], value: Any, what: str) -> Model:
    """`value` (decoded JSON) as a pydantic model of PyIceberg's, or RAT-REST-008 naming the first fault (an
    unknown update action included)."""
    if not isinstance(value, dict):
        raise bad_request(f"{what}: a JSON object is expected")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = exc.errors()
        message = errors[0]["msg"] if errors else "not valid"
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        raise bad_request(f"{what}: {message}" + (f" at {where[:120]}" if where else "")) from None


def metadata_json(metadata: Any) -> dict[str, Any]:
    """TableMetadata as the spec's JSON (PyIceberg's own serialization, as in a metadata file)."""
    return json.loads(metadata.model_dump_json())


def load_result(location: str | None, metadata: Any) -> dict[str, Any]:
    """A LoadTableResult: where the metadata file is, what it says, and no extra client config."""
    result: dict[str, Any] = {"metadata": metadata_json(metadata), "config": {}}
    if location is not None:
        result["metadata-location"] = location
    return result
