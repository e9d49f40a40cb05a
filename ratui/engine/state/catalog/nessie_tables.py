"""PyIceberg's catalog for one ref of a Nessie server: tables are Iceberg metadata files plus a Nessie commit.

Like PyIceberg's SqlCatalog, it writes the table's metadata file itself (through the project's FileIO, so paths map
the way every ref's SqlCatalog maps them) and then moves the pointer; here the pointer is an ICEBERG_TABLE content
on the ref (metadataLocation, snapshotId, schemaId, specId, sortOrderId, and the content id it keeps across
branches), and moving it is a Nessie commit. Nessie's per-key optimistic lock does the compare-and-swap: a table
commit is sent with the hash its table was loaded at, so if another writer changed that table on the ref in the
meantime Nessie refuses it (CommitFailedException: PyIceberg's own "retry me" error) instead of losing the other
write. A table loaded elsewhere is guarded by the hash its current content was read at.

A table is created with the two properties Iceberg's own NessieCatalog gives every table it creates, `gc.enabled` and
`write.metadata.delete-after-commit.enabled` false: another engine reading ratui's tables through Nessie then refuses
to expire snapshots, remove orphan files or purge on one branch, which would delete files other refs still use.

Namespaces are NAMESPACE contents; Nessie refuses a table whose namespace is absent, so they are created (parents
first) in the table's own commit when missing. A namespace has no properties unless someone set some.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog, MetastoreCatalog, PropertiesUpdateSummary
from pyiceberg.exceptions import (
    CommitFailedException, NamespaceAlreadyExistsError, NamespaceNotEmptyError, NoSuchNamespaceError,
    NoSuchTableError, NoSuchViewError, TableAlreadyExistsError,
)
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table, TableProperties
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from ratui.engine.errors import RatuiError
from ratui.engine.state.catalog import nessie_tree as tree
from ratui.engine.state.catalog.nessie_http import NessieHttp, key_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.table import TableRequirement, TableUpdate
    from pyiceberg.view import View

_LOADED_MAX = 4096
# what Iceberg's NessieCatalog sets on a new table (a caller's own value wins)
TABLE_DEFAULTS = {"gc.enabled": "false", "write.metadata.delete-after-commit.enabled": "false"}


class NessieRefCatalog(MetastoreCatalog):
    """Tables of ref `ref` on the Nessie server `api`. A table commit's meta says what it did to which table."""

    def __init__(self, ref: str, api: NessieHttp, **properties: str):
        super().__init__(ref, **properties)
        self.ref = ref
        self._api = api
        # (table key, metadata location) -> (hash it was read at, content id): the guard of the next commit
        self._loaded: dict[tuple[str, str], tuple[str, str | None]] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- tables

    def load_table(self, identifier: str | Identifier) -> Table:
        return self._read(self._key(identifier))[0]

    def _read(self, key: str) -> tuple[Table, str, str | None]:
        """The table on the ref's head, the hash it was read at and its content id."""
        found = tree.content(self._api, self.ref, key)
        if found is None or found[1].get("type") != tree.TABLE:
            raise NoSuchTableError(f"Table does not exist: {key}")
        hash, value = found
        location = value["metadataLocation"]
        self._remember(key, location, hash, value.get("id"))
        io = load_file_io(properties=self.properties, location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        table = Table(identifier=tuple(key.split(".")), metadata=metadata, metadata_location=location,
                      io=self._load_file_io(metadata.properties, location), catalog=self)
        return table, hash, value.get("id")

    def create_table(self, identifier: str | Identifier, schema: Schema | pa.Schema, location: str | None = None,
                     partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
                     sort_order: SortOrder = UNSORTED_SORT_ORDER, properties: Properties = EMPTY_DICT) -> Table:
        # As SqlCatalog.create_table does (MetastoreCatalog's staging takes one-level namespaces only).
        key = self._key(identifier)
        properties = {**TABLE_DEFAULTS, **properties}
        schema = self._convert_schema_if_needed(  # type: ignore[assignment]
            schema, int(properties.get(TableProperties.FORMAT_VERSION,  # type: ignore[arg-type]
                                       TableProperties.DEFAULT_FORMAT_VERSION)))
        namespace, name = key.rpartition(".")[0], key.rpartition(".")[2]
        location = self._resolve_table_location(location, namespace, name)
        metadata_location = load_location_provider(location, properties).new_table_metadata_file_location()
        metadata = new_table_metadata(location=location, schema=schema, partition_spec=partition_spec,
                                      sort_order=sort_order, properties=properties)
        hash, entries = tree.contents(self._api, self.ref)
        if key in entries:
            raise TableAlreadyExistsError(f"Table {key} already exists on {self.ref}")
        self._write_metadata(metadata, load_file_io(properties=self.properties, location=metadata_location),
                             metadata_location)
        ops = tree.namespace_puts(entries, [key])
        ops.append(tree.put(key, tree.table_content(metadata_location, metadata, None)))
        self._commit(key, hash, f"create table {key}", ops, "create", exists=TableAlreadyExistsError)
        return self.load_table(identifier)

    def register_table(self, identifier: str | Identifier, metadata_location: str, overwrite: bool = False) -> Table:
        key = self._key(identifier)
        hash, entries = tree.contents(self._api, self.ref)
        if key in entries and not overwrite:
            raise TableAlreadyExistsError(f"Table {key} already exists on {self.ref}")
        io = load_file_io(properties=self.properties, location=metadata_location)
        metadata = FromInputFile.table_metadata(io.new_input(metadata_location))
        ops = tree.namespace_puts(entries, [key])
        ops.append(tree.put(key, tree.table_content(metadata_location, metadata, (entries.get(key) or {}).get("id"))))
        self._commit(key, hash, f"register table {key}", ops, "register", exists=TableAlreadyExistsError)
        return self.load_table(identifier)

    def commit_table(self, table: Table, requirements: tuple[TableRequirement, ...],
                     updates: tuple[TableUpdate, ...]) -> CommitTableResponse:
        key = self._key(table.name())
        with self._lock:  # before reading the head again, which remembers the head's hash for that location
            held = self._loaded.get((key, table.metadata_location))
        try:
            current, head, content_id = self._read(key)
        except NoSuchTableError:
            current, content_id = None, None
            if not any(type(r).__name__ == "AssertCreate" for r in requirements):
                # not a creation: the table this write loaded is gone (another client dropped it). Not a
                # CommitFailedException, which PyIceberg would retry by loading a table that is not there
                raise RatuiError("RAT-CAT-005", f"table '{key}' was dropped on '{self.ref}' while this write held "
                                 "it (by another Nessie client): nothing was written",
                                 details={"tables": [key]}) from None
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        if current is not None and staged.metadata == current.metadata:
            return CommitTableResponse(metadata=current.metadata,  # type: ignore[call-arg]
                                       metadata_location=current.metadata_location)
        ops: list[dict] = []
        if current is not None:
            # The guard: the hash the caller's table was loaded at, so a change anyone made since then fails.
            if held is None and table.metadata_location != current.metadata_location:
                raise CommitFailedException(f"{key} changed on {self.ref} since it was loaded")
            hash = held[0] if held is not None else head
        else:
            hash, entries = tree.contents(self._api, self.ref)
            ops = tree.namespace_puts(entries, [key])
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        ops.append(tree.put(key, tree.table_content(staged.metadata_location, staged.metadata, content_id)))
        self._commit(key, hash, f"{'update' if current else 'create'} table {key}", ops,
                     "update" if current else "create", location=staged.metadata_location)
        return CommitTableResponse(metadata=staged.metadata,  # type: ignore[call-arg]
                                   metadata_location=staged.metadata_location)

    def drop_table(self, identifier: str | Identifier) -> None:
        key = self._key(identifier)
        found = tree.content(self._api, self.ref, key)
        if found is None or found[1].get("type") != tree.TABLE:
            raise NoSuchTableError(f"Table does not exist: {key}")
        # Drops the pointer only: the files are shared with other refs.
        self._commit(key, found[0], f"drop table {key}", [tree.remove(key)], "drop")

    def rename_table(self, from_identifier: str | Identifier, to_identifier: str | Identifier) -> Table:
        source, target = self._key(from_identifier), self._key(to_identifier)
        hash, entries = tree.contents(self._api, self.ref)
        if entries.get(source, {}).get("type") != tree.TABLE:
            raise NoSuchTableError(f"Table does not exist: {source}")
        if target in entries:
            raise TableAlreadyExistsError(f"Table {target} already exists on {self.ref}")
        ops = [tree.remove(source), *tree.namespace_puts(entries, [target]), tree.put(target, entries[source])]
        self._commit(target, hash, f"rename table {source} to {target}", ops, "rename")
        return self.load_table(to_identifier)

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        prefix = key_of(list(self.identifier_to_tuple(namespace)))
        _, entries = tree.contents(self._api, self.ref)
        if prefix and prefix not in entries:
            raise NoSuchNamespaceError(f"Namespace does not exist: {prefix}")
        return [tuple(key.split(".")) for key, value in sorted(entries.items())
                if value.get("type") == tree.TABLE and key.rpartition(".")[0] == prefix]

    # ---------------------------------------------------------------- namespaces

    def create_namespace(self, namespace: str | Identifier, properties: Properties = EMPTY_DICT) -> None:
        name = key_of(list(self.identifier_to_tuple(namespace)))
        hash, entries = tree.contents(self._api, self.ref)
        if name in entries:
            raise NamespaceAlreadyExistsError(f"Namespace {name} already exists on {self.ref}")
        ops = tree.namespace_puts(entries, [name + ".x"])
        if properties:
            ops[-1]["content"]["properties"] = dict(properties)
        self._commit(name, hash, f"create namespace {name}", ops, "create namespace",
                     exists=NamespaceAlreadyExistsError)

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        name = key_of(list(self.identifier_to_tuple(namespace)))
        found = tree.content(self._api, self.ref, name) if name else None
        if found is None or found[1].get("type") != tree.NAMESPACE:
            raise NoSuchNamespaceError(f"Namespace does not exist: {name}")
        return dict(found[1].get("properties") or {})

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        parent = list(self.identifier_to_tuple(namespace)) if namespace else []
        _, entries = tree.contents(self._api, self.ref)
        return [tuple(key.split(".")) for key, value in sorted(entries.items())
                if value.get("type") == tree.NAMESPACE and key.split(".")[:-1] == parent]

    def drop_namespace(self, namespace: str | Identifier) -> None:
        name = key_of(list(self.identifier_to_tuple(namespace)))
        hash, entries = tree.contents(self._api, self.ref)
        if entries.get(name, {}).get("type") != tree.NAMESPACE:
            raise NoSuchNamespaceError(f"Namespace does not exist: {name}")
        if any(key.startswith(name + ".") for key in entries):
            raise NamespaceNotEmptyError(f"Namespace {name} is not empty")
        self._commit(name, hash, f"drop namespace {name}", [tree.remove(name)], "drop namespace")

    def update_namespace_properties(self, namespace: str | Identifier, removals: set[str] | None = None,
                                    updates: Properties = EMPTY_DICT) -> PropertiesUpdateSummary:
        name = key_of(list(self.identifier_to_tuple(namespace)))
        found = tree.content(self._api, self.ref, name)
        if found is None or found[1].get("type") != tree.NAMESPACE:
            raise NoSuchNamespaceError(f"Namespace does not exist: {name}")
        hash, value = found
        summary, props = self._get_updated_props_and_update_summary(dict(value.get("properties") or {}), removals,
                                                                    updates)
        self._commit(name, hash, f"update namespace {name}", [tree.put(name, {**value, "properties": props})],
                     "update namespace")
        return summary

    # ---------------------------------------------------------------- views: ratui keeps none on Nessie yet

    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        return []

    def view_exists(self, identifier: str | Identifier) -> bool:
        return False

    def load_view(self, identifier: str | Identifier) -> View:
        raise NoSuchViewError(f"View does not exist: {identifier}")

    def drop_view(self, identifier: str | Identifier) -> None:
        raise NoSuchViewError(f"View does not exist: {identifier}")

    def register_view(self, identifier: str | Identifier, metadata_location: str) -> View:
        raise NotImplementedError("views are not kept on Nessie by ratui yet")

    # ---------------------------------------------------------------- plumbing

    @staticmethod
    def _key(identifier: str | Identifier) -> str:
        return ".".join(Catalog.identifier_to_tuple(identifier))

    def _remember(self, key: str, location: str, hash: str, content_id: str | None) -> None:
        with self._lock:
            if len(self._loaded) >= _LOADED_MAX:
                self._loaded.clear()
            self._loaded[(key, location)] = (hash, content_id)

    def _commit(self, key: str, expected: str, message: str, ops: list[dict], action: str, *,
                exists: type[Exception] = CommitFailedException, location: str | None = None) -> None:
        """One Nessie commit; a conflict on the key becomes PyIceberg's error for it (CommitFailedException, or
        `exists` for a create), a ref that is gone RAT-CAT-002."""
        try:
            meta = {"kind": "table", "action": action, "table": key}
            response = tree.commit(self._api, self.ref, expected, message, ops, meta)
        except RatuiError as e:
            if e.code == "RAT-CAT-003":
                raise exists(f"{key} changed on {self.ref} meanwhile: {e.message}") from None
            raise
        if location is not None:
            new_hash = response["targetBranch"]["hash"]
            added = {key_of(a["key"]["elements"]): a.get("contentId") for a in response.get("addedContents") or []}
            content_id = next((op["content"].get("id") for op in ops if op.get("type") == "PUT"
                               and key_of(op["key"]["elements"]) == key), None) or added.get(key)
            self._remember(key, location, new_hash, content_id)
