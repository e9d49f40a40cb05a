"""What a REST request does to a ref of ratui's branch catalog: namespaces, table loads, creates, commits, drops and
renames. Backend-neutral: only the BranchCatalog interface (base.py) is used, so the embedded catalog and a Nessie
server behave the same.

Every change to tables is ONE ratui commit on the ref, made by `BranchCatalog.restore`: the new metadata files are
written first (through the project's FileIO, as PyIceberg's own catalogs do), then one compare-and-swap moves every
table's pointer from the location the request was checked against to the new one. If another writer moved one of
those tables meanwhile, nothing moves (RAT-CAT-003 -> 409 CommitFailedException, the client retries); a metadata
file written for a refused commit is referenced by nothing and goes with the orphan sweep. So a multi-table
`transactions/commit` is all or nothing, and what an outside engine commits is a commit in `ratui log`, kind
"external", that `ratui diff` and `ratui merge` treat like any other.

Namespaces: a ref has the namespaces of its tables (every prefix) plus those created on it. On the embedded catalog
a namespace of its own is a row of PyIceberg's namespace table for that ref (not a commit: only tables are in
ratui's history); on Nessie it is a NAMESPACE content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.exceptions import (
    CommitFailedException, NamespaceAlreadyExistsError, NamespaceNotEmptyError, NoSuchNamespaceError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.table import TableIdentifier
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import AssertCreate, TableRequirement, TableUpdate
from pyiceberg.typedef import IcebergBaseModel

from ratui.engine.errors import RatuiError
from ratui.engine.state.catalog.base import MAIN, BranchCatalog, split_spec
from ratui.rest import shapes
from ratui.rest.shapes import RestError

if TYPE_CHECKING:
    from pyiceberg.table import Table

VIA = "iceberg-rest"
# What Iceberg's own NessieCatalog gives every table it creates (a client's own value wins): another engine then
# refuses to expire snapshots, remove orphan files or purge on one branch, which would delete files other refs use.
TABLE_DEFAULTS = {"gc.enabled": "false", "write.metadata.delete-after-commit.enabled": "false"}


class TableChangeRequest(IcebergBaseModel):
    """One table's part of a commit: `identifier` is optional on a table's own route (it names the table)."""

    identifier: TableIdentifier | None = Field(default=None)
    requirements: tuple[TableRequirement, ...] = Field(default_factory=tuple)
    updates: tuple[TableUpdate, ...] = Field(default_factory=tuple)


class CreateRequest(CreateTableRequest):
    """PyIceberg's CreateTableRequest, with `location` optional as the spec has it (ratui places tables itself)."""

    location: str | None = Field(default=None)
    partition_spec: PartitionSpec | None = Field(alias="partition-spec", default=None)
    write_order: SortOrder | None = Field(alias="write-order", default=None)


class TransactionRequest(IcebergBaseModel):
    table_changes: list[TableChangeRequest] = Field(alias="table-changes")


class Tables:
    """The REST catalog's view of `catalog`: refs in `read_only` (and every past state "ref@HASH") are never written."""

    def __init__(self, catalog: BranchCatalog, read_only: frozenset[str] = frozenset({MAIN})):
        self.catalog = catalog
        self.read_only = read_only

    # ------------------------------------------------------------------------------------------------ refs

    def check_ref(self, ref: str) -> None:
        """RAT-CAT-002 (no such ref) or RAT-CAT-010 (no such commit) as a 404."""
        if not ref or len(ref) > 200:
            raise shapes.bad_name("a ref name is 1 to 200 characters")
        self.catalog.get_ref(ref)

    def writable(self, ref: str) -> None:
        if split_spec(ref)[1] is not None:
            raise shapes.read_only(ref, "a past state (REF@COMMIT) can be read, not written")
        if ref in self.read_only:
            raise shapes.read_only(ref, "this server refuses outside writes to it (main unless --writable-main, "
                                        "and each --read-only-ref), so that only ratui's quality gate publishes to "
                                        "it; write on a branch, then `ratui merge` it")
        self.check_ref(ref)

    def pointers(self, ref: str) -> dict[str, str]:
        return self.catalog.table_pointers(ref)

    # ------------------------------------------------------------------------------------------ namespaces

    def _own_namespaces(self, ref: str) -> set[tuple[str, ...]]:
        """Namespaces created on the ref itself, nested ones included (none for a past state: only its tables are
        recorded)."""
        if split_spec(ref)[1] is not None:
            return set()
        catalog = self.catalog.iceberg(ref)
        found: set[tuple[str, ...]] = set()
        todo: list[tuple[str, ...]] = [()]
        while todo:
            parent = todo.pop()
            try:
                children = catalog.list_namespaces(parent)
            except NoSuchNamespaceError:
                continue
            for child in map(tuple, children):
                if child not in found and len(child) == len(parent) + 1:
                    found.add(child)
                    todo.append(child)
        return found

    def all_namespaces(self, ref: str) -> set[tuple[str, ...]]:
        found = set(self._own_namespaces(ref))
        for key in self.pointers(ref):
            parts = tuple(key.split("."))[:-1]
            found.update(parts[:i] for i in range(1, len(parts) + 1))
        return found

    def namespaces(self, ref: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        every = self.all_namespaces(ref)
        if parent and parent not in every:
            raise shapes.no_namespace(parent, ref)
        return sorted(ns for ns in every if len(ns) == len(parent) + 1 and ns[:len(parent)] == parent)

    def require_namespace(self, ref: str, namespace: tuple[str, ...]) -> None:
        if namespace not in self.all_namespaces(ref):
            raise shapes.no_namespace(namespace, ref)

    def namespace_properties(self, ref: str, namespace: tuple[str, ...]) -> dict[str, str]:
        self.require_namespace(ref, namespace)
        if split_spec(ref)[1] is not None:
            return {}
        try:
            props = dict(self.catalog.iceberg(ref).load_namespace_properties(namespace))
        except NoSuchNamespaceError:  # a namespace that only its tables make
            return {}
        props.pop("exists", None)  # PyIceberg's marker row of a namespace without properties
        return props

    def create_namespace(self, ref: str, namespace: tuple[str, ...], properties: dict[str, str]) -> None:
        self.writable(ref)
        if namespace in self.all_namespaces(ref):
            raise shapes.already_exists(f"namespace '{'.'.join(namespace)}' on '{ref}'")
        try:
            self.catalog.iceberg(ref).create_namespace(namespace, properties)
        except NamespaceAlreadyExistsError:
            raise shapes.already_exists(f"namespace '{'.'.join(namespace)}' on '{ref}'") from None

    def update_namespace_properties(self, ref: str, namespace: tuple[str, ...], removals: set[str],
                                    updates: dict[str, str]) -> dict[str, list[str]]:
        self.writable(ref)
        self.require_namespace(ref, namespace)
        catalog = self.catalog.iceberg(ref)
        try:
            catalog.load_namespace_properties(namespace)
        except NoSuchNamespaceError:  # made by its tables only: give it a row of its own first
            catalog.create_namespace(namespace, {})
        try:
            summary = catalog.update_namespace_properties(namespace, removals, updates)
        except ValueError as exc:  # a key both removed and updated
            raise shapes.bad_request(str(exc)[:200]) from None
        return {"updated": sorted(summary.updated), "removed": sorted(summary.removed),
                "missing": sorted(summary.missing)}

    def drop_namespace(self, ref: str, namespace: tuple[str, ...]) -> None:
        self.writable(ref)
        self.require_namespace(ref, namespace)
        inside = sorted(k for k in self.pointers(ref) if tuple(k.split("."))[:len(namespace)] == namespace)
        children = [ns for ns in self._own_namespaces(ref) if len(ns) > len(namespace) and
                    ns[:len(namespace)] == namespace]
        if inside or children:
            raise RestError(409, "NamespaceNotEmptyException", "RAT-REST-014",
                            f"namespace '{'.'.join(namespace)}' on '{ref}' is not empty: "
                            f"{', '.join(inside[:5]) or '.'.join(children[0])}")
        try:
            self.catalog.iceberg(ref).drop_namespace(namespace)
        except NoSuchNamespaceError:
            pass  # made by tables that are gone: nothing left to drop
        except NamespaceNotEmptyError as exc:
            raise RestError(409, "NamespaceNotEmptyException", "RAT-REST-014", str(exc)[:200]) from None

    # ---------------------------------------------------------------------------------------------- tables

    def list_tables(self, ref: str, namespace: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
        self.require_namespace(ref, namespace)
        out = []
        for key in sorted(self.pointers(ref)):
            parts = tuple(key.split("."))
            if parts[:-1] == namespace:
                out.append((namespace, parts[-1]))
        return out

    def load(self, ref: str, key: str) -> Table:
        location = self.pointers(ref).get(key)
        if location is None:
            raise shapes.no_table(key, ref)
        return self.catalog.static_table(location)

    def create(self, ref: str, namespace: tuple[str, ...], request: CreateRequest, *,
               client: str) -> tuple[str | None, Any]:
        """A new table (its metadata v0 at ratui's place for it); a stage-create writes nothing and returns the
        metadata the client's transaction then commits with AssertCreate."""
        key = shapes.table_key(namespace, shapes.checked_table_name(request.name))
        self.writable(ref)
        place = self.catalog.table_location(key)
        if request.location and request.location.rstrip("/") != place.rstrip("/"):
            raise shapes.bad_request(f"table location {request.location[:120]} refused: ratui places table {key} at "
                                     f"{place} (leave the location out)")
        if key in self.pointers(ref):
            raise shapes.already_exists(f"table '{key}' on '{ref}'")
        if namespace not in self.all_namespaces(ref):
            raise shapes.no_namespace(namespace, ref)
        catalog = self._metastore(ref)
        properties = {**TABLE_DEFAULTS, **request.properties}
        try:
            metadata = new_table_metadata(location=place, schema=request.table_schema,
                                          partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                                          sort_order=request.write_order or UNSORTED_SORT_ORDER,
                                          properties=properties)
        except (ValueError, TypeError) as exc:
            raise shapes.bad_request(f"table {key}: {str(exc)[:200]}") from None
        if request.stage_create:
            return None, metadata
        location = load_location_provider(place, properties).new_table_metadata_file_location()
        io = catalog._load_file_io(properties=properties, location=location)  # noqa: SLF001 - the ref's FileIO
        catalog._write_metadata(metadata, io, location)  # noqa: SLF001
        self._record(ref, {key: location}, {key: None}, "create", [key], client)
        return location, metadata

    def commit(self, ref: str, changes: list[tuple[str, tuple, tuple]], *, client: str,
               action: str = "commit") -> list[tuple[str, Any]]:
        """Check every table's requirements against the ref's current metadata, write each new metadata file, then
        move every pointer in one ratui commit (all or nothing). Returns (location, metadata) per change."""
        self.writable(ref)
        keys = [key for key, _r, _u in changes]
        if len(set(keys)) != len(keys):
            raise shapes.bad_request("a transaction names a table twice; send each table's changes once")
        if not changes:
            raise shapes.bad_request("a commit needs at least one table change")
        catalog = self._metastore(ref)
        before = self.pointers(ref)
        staged = []
        for key, requirements, updates in changes:
            location = before.get(key)
            current = self.catalog.static_table(location) if location is not None else None
            if current is None and not any(isinstance(r, AssertCreate) for r in requirements):
                raise shapes.no_table(key, ref)
            namespace, name = tuple(key.split("."))[:-1], key.rsplit(".", 1)[1]
            if current is None and namespace not in self.all_namespaces(ref):
                raise shapes.no_namespace(namespace, ref)
            try:
                table = catalog._update_and_stage_table(  # noqa: SLF001 - PyIceberg's own commit step
                    current, namespace + (name,), tuple(requirements), tuple(updates))
            except CommitFailedException as exc:
                raise RestError(409, "CommitFailedException", "RAT-REST-007",
                                f"table {key} on '{ref}': {str(exc)[:300]}") from None
            except (ValueError, TypeError, KeyError) as exc:
                raise shapes.bad_request(f"table {key}: {str(exc)[:300]}") from None
            place = current.metadata.location if current is not None else self.catalog.table_location(key)
            if table.metadata.location.rstrip("/") != place.rstrip("/"):
                raise shapes.bad_request(f"table {key}: its location cannot move ({table.metadata.location[:120]}); "
                                         f"ratui keeps it at {place}")
            staged.append((key, table))
        for _key, table in staged:
            catalog._write_metadata(table.metadata, table.io, table.metadata_location)  # noqa: SLF001
        self._record(ref, {key: t.metadata_location for key, t in staged}, {key: before.get(key) for key in keys},
                     action, keys, client)
        return [(t.metadata_location, t.metadata) for _key, t in staged]

    def drop(self, ref: str, key: str, *, client: str) -> None:
        """The table leaves the ref (its files stay: other refs and past commits share them; `purgeRequested` is
        refused for that reason)."""
        self.writable(ref)
        location = self.pointers(ref).get(key)
        if location is None:
            raise shapes.no_table(key, ref)
        self._record(ref, {key: None}, {key: location}, "drop", [key], client)

    def rename(self, ref: str, source: str, destination: str, *, client: str) -> None:
        """One commit: the table leaves `source`'s key and appears under `destination`'s, same metadata file."""
        self.writable(ref)
        pointers = self.pointers(ref)
        location = pointers.get(source)
        if location is None:
            raise shapes.no_table(source, ref)
        if destination in pointers:
            raise shapes.already_exists(f"table '{destination}' on '{ref}'")
        namespace = tuple(destination.split("."))[:-1]
        if namespace not in self.all_namespaces(ref):
            raise shapes.no_namespace(namespace, ref)
        self._record(ref, {source: None, destination: location}, {source: location, destination: None},
                     "rename", [source, destination], client)

    def _metastore(self, ref: str) -> MetastoreCatalog:
        """The ref's PyIceberg catalog, whose own steps (stage a commit, write a metadata file through the project's
        FileIO) the commits here reuse; both backends' are MetastoreCatalogs (SqlCatalog, NessieRefCatalog)."""
        catalog = self.catalog.iceberg(ref)
        if not isinstance(catalog, MetastoreCatalog):
            raise TypeError(f"the catalog of {ref} is a {type(catalog).__name__}, not a MetastoreCatalog")
        return catalog

    def _record(self, ref: str, pointers: dict[str, str | None], expected: dict[str, str | None], action: str,
                keys: list[str], client: str) -> None:
        message = f"iceberg rest {action}: {', '.join(keys)}" + (f" (by {client})" if client else "")
        meta = {"kind": "external", "via": VIA, "action": action, "tables": sorted(keys), "client": client or None}
        try:
            self.catalog.restore(ref, pointers, expected, message, meta=meta)
        except RatuiError as exc:
            if exc.code == "RAT-CAT-003":
                raise RestError(409, "CommitFailedException", "RAT-CAT-003",
                                f"{exc.message}; nothing was committed (load the tables again and retry)") from None
            raise
