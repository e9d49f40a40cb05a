"""The branch catalog interface: Nessie's model (refs, commits, per-ref table pointers), backend-neutral.

Backends:
- `SqliteBranchCatalog` (catalog/sqlite.py) embeds the model in the project's SQLite database, with PyIceberg's
  SqlCatalog doing the table commits, one `catalog_name` per ref.
- A Nessie REST backend can implement the same interface against a real Nessie server: refs, commits, diff and
  merge through Nessie's API v2 (`/api/v2/trees`, `/trees/{ref}/history`, `/trees/{ref}/diff/{from}`,
  `/trees/{into}/history/merge`), and `iceberg(ref)` as a PyIceberg REST catalog at `{server}/iceberg/{ref}`.

Table keys are strings "namespace.layer.name" (e.g. "ecommerce.silver.clean_orders"). The PyIceberg identifier
is the namespace tuple ("ecommerce", "silver") plus the table name "clean_orders"; see `split_key`.

Nessie's merge rule: a table the branch changed since its fork point that the target ALSO changed since that
fork point is a conflict; tables only the branch changed are applied to the target, all or nothing.
Deleting a branch removes its pointers only: data and metadata files are shared between refs and are never
deleted by the catalog (the reaper reclaims them once nothing kept reaches them: ops/orphans.py). The embedded
catalog records each deletion (`deleted_refs`) for that.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Literal

from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from ratui.engine.storage.warehouse import Warehouse
from ratui.engine.locations import ProjectLocations


ChangeKind = Literal["added", "modified", "dropped"]


@dataclass(frozen=True)
class Ref:
    """A branch. `head` is its newest commit; `fork_hash` the source ref's head when it was created (None for main)."""

    name: str
    head: str
    created_at: str  # ISO-8601, UTC
    fork_hash: str | None
    run_id: str | None


@dataclass(frozen=True)
class DeletedRef:
    """A branch that was deleted: the head it had then, and when (ISO, UTC). `deleted_at` is None when the catalog
    did not record the deletion (a branch deleted before ratui recorded them): `head`'s time is all that is known."""

    name: str
    head: str
    deleted_at: str | None
    pointers: dict[str, str] = field(default_factory=dict)  # its tables when deleted: key -> metadata location


@dataclass(frozen=True)
class Commit:
    """One recorded state of a ref: `pointers` maps every table key to its Iceberg metadata location.

    `meta` says what made it, for history and rollback: {"kind": "run" | "merge" | "rollback" | "branch" |
    "reaper", "run_id", "pipeline", "version" (the pipeline definition's hash), "from" (a merged ref),
    "runs" (the runs a merged ref carried), "to" (a rollback's target commit)}: whichever apply."""

    hash: str
    parent: str | None
    ref: str
    message: str
    created_at: str  # ISO-8601, UTC
    pointers: dict[str, str]
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TableChange:
    """A table the branch changed since its fork point. `conflict`: the target changed it too."""

    table: str
    change: ChangeKind
    branch_location: str | None  # None when dropped on the branch
    main_location: str | None  # the target ref's current pointer (None when absent there)
    fork_location: str | None  # the pointer at the fork point (None when added on the branch)
    conflict: bool


@dataclass(frozen=True)
class MergeResult:
    """`tables`: keys applied (or, for a dry run, that would be). `commit`: the new commit on `into`, None when
    nothing changed or for a dry run. `conflicts`: keys in conflict (only ever non-empty for a dry run; a real
    merge raises RAT-CAT-003 instead). `by_append`: tables both sides only appended to, merged (or, for a dry run,
    that would merge) by re-committing the branch's added files on `into` (catalog/append_merge.py);
    `reasons`: why each table in `conflicts` is one, when known."""

    ref: str
    into: str
    tables: list[str]
    commit: Commit | None
    dry_run: bool
    conflicts: list[str]
    by_append: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def split_spec(spec: str) -> tuple[str, str | None]:
    """"main@3f2a9c" -> ("main", "3f2a9c"); "main" -> ("main", None). A ref at a commit reads the tables as that
    commit recorded them (time travel); it cannot be written."""
    name, at, commit = spec.partition("@")
    return name, (commit if at else None)


def split_key(key: str) -> tuple[tuple[str, ...], str]:
    """"ecommerce.silver.clean_orders" -> (("ecommerce", "silver"), "clean_orders")."""
    parts = key.split(".")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"table key must be 'namespace.layer.name', got {key!r}")
    return tuple(parts[:-1]), parts[-1]


@dataclass(frozen=True)
class Pointer:
    """One table (or view) on one ref: the metadata file the ref points at, and the one before it when known.

    `ref` is a ref's name, or "ref@HASH" for a past commit's pointer (`past`): the orphan-file sweep keeps only the
    state such a commit recorded (its metadata file and current snapshot), so snapshot expiry still frees older
    snapshots, and a metadata file already gone protects nothing."""

    ref: str
    table: str  # the table key, "namespace.layer.name"
    location: str
    previous: str | None = None
    view: bool = False
    past: bool = False
    deleted: bool = False  # a deleted branch's head, kept whole as a live ref's is (skipped when its metadata is gone)


class BranchCatalog(ABC):
    """Refs, commits and per-ref table pointers, Nessie-style. Every method is safe to call from worker threads.

    `in_tx` callbacks get a sqlite3 connection of the project's state database inside a write transaction: the
    embedded catalog runs them inside its own transaction (they commit or roll back with the change); a catalog on
    a server runs them right after the server accepted the change (see nessie.py for that gap)."""

    locations: ProjectLocations  # how table files map to this project's folders (FileIO, the orphan sweep)
    # the folder holding the tables ({namespace}/warehouse/{layer}/{name}/): the project folder, or a Nessie
    # catalog's catalog.warehouse; the project folder when the tables are in an object store
    warehouse: Path
    storage: Warehouse  # where the tables really are: that folder, or an s3:// warehouse (storage/warehouse.py)

    def table_location(self, key: str) -> str:
        """Where a new table `key` goes (every ref creates it at the same place)."""
        return self.storage.table_location(key)

    def file_io_properties(self) -> dict[str, str]:
        """What PyIceberg's FileIO needs for this catalog's tables: the project's path rules, the object store's
        settings and credentials (never stored in a table: catalog properties only)."""
        return {**self.locations.file_io_properties(), **self.storage.file_io_properties()}

    @classmethod
    @abstractmethod
    def opened(cls, *, db_path: Path, root: Path, warehouse: Warehouse, allow_outside: tuple[Path, ...],
               uri: str | None, token: str | None) -> BranchCatalog:
        """The project's catalog of this backend, from ratui.yaml's `catalog:` section (state/catalog/config.py
        checked it): its state database, the project folder, where its tables are, the folders outside the project
        it may read, and a server's URL and token (None for a backend without a server)."""

    @abstractmethod
    def allow_outside(self, folders: tuple[Path, ...]) -> None:
        """New allowed folders (ratui.yaml reloaded): tables loaded from now on use them."""

    @abstractmethod
    def create_branch(self, name: str, *, from_ref: str = MAIN, run_id: str | None = None,
                      in_tx: Callable[[Any], None] | None = None) -> Ref:
        """A new ref pointing at `from_ref`'s current tables (no data copied). RAT-CAT-001 if it exists."""

    @abstractmethod
    def list_refs(self) -> list[Ref]:
        """Every live ref, main first."""

    def change_token(self) -> object | None:
        """A value that changes whenever any client commits to, creates or deletes a ref of this catalog, cheap
        enough to ask every few seconds (the console follows a shared server with it); None when a backend has
        no such value (the embedded catalog: its SQLite file says when another process committed)."""
        return None

    @abstractmethod
    def get_ref(self, name: str) -> Ref:
        """The ref; RAT-CAT-002 if there is none of that name."""

    @abstractmethod
    def log(self, ref: str, limit: int = 50, *, own: bool = False) -> list[Commit]:
        """Commits reachable from the ref's head through parents, newest first. Works for deleted branches too:
        their commits are kept for audit. `own`: only the ref's own commits, and the first one before them that is
        not (where a branch was created from): what is known of a branch without walking its origin's history."""

    @abstractmethod
    def diff(self, ref: str, against: str = MAIN) -> list[TableChange]:
        """The tables `ref` changed since its fork point, with the locations on both sides and conflict flags."""

    @abstractmethod
    def merge(
        self, ref: str, into: str = MAIN, *, message: str | None = None, dry_run: bool = False,
        in_tx: Callable[[Any, MergeResult], None] | None = None, meta: dict | None = None,
        skip: Collection[str] = (),
    ) -> MergeResult:
        """Apply every table `ref` changed since its fork point to `into`, atomically.

        `skip`: table keys left unmerged (Nessie's DROP merge mode): neither applied nor in conflict.

        Raises RatuiError RAT-CAT-003 with details={"tables": [...]} on conflict, leaving `into` unchanged.
        `dry_run` computes the result (conflicts included) and changes nothing. A branch without changes
        merges successfully and records nothing (commit None). `meta` is the merge commit's meta (default
        {"kind": "merge", "from": ref}); `in_tx(conn, result)` see the class docstring.
        """

    @abstractmethod
    def delete_branch(self, name: str, in_tx: Callable[[Any], None] | None = None) -> None:
        """Drop the ref's pointers; keep its commits; delete no files. RAT-CAT-004 for main, RAT-CAT-002 if absent."""

    def revive_branch(self, name: str, head: str, pointers: dict[str, str],
                      in_tx: Callable[[Any], None] | None = None) -> Ref:
        """A deleted branch back at its last head `head` (a commit kept for audit), with the tables it had
        (`pointers`, as they were when it was deleted): what undoing a delete does. RAT-CAT-001 if a branch of that
        name exists again; RAT-UNDO-003 when the backend cannot reach the commit any more."""
        from ratui.engine.errors import RatuiError

        raise RatuiError("RAT-UNDO-003", f"this catalog cannot bring back branch '{name}'")

    @abstractmethod
    def iceberg(self, ref: str) -> Catalog:
        """A PyIceberg catalog that loads and commits tables on `ref` (cached per ref)."""

    @abstractmethod
    def table_pointers(self, ref: str) -> dict[str, str]:
        """The ref's current table key -> metadata location map."""

    def every_pointer(self) -> list[Pointer]:
        """Every table pointer of every ref, for the orphan-file sweep. This default reads ref by ref; a backend
        that can read them at one instant (the embedded catalog: one transaction) does."""
        out: list[Pointer] = []
        for ref in self.list_refs():
            out.extend(Pointer(ref.name, key, location) for key, location in
                       sorted(self.table_pointers(ref.name).items()))
        return out

    def deleted_refs(self, since: str | None = None) -> list[DeletedRef]:
        """The branches this catalog deleted at or after ISO time `since` (every one it knows of when None), newest
        first. A backend that keeps no record of deletions knows none (the default)."""
        return []

    def history_from(self, hash: str, ref: str) -> list[Commit]:
        """The commits from `hash` (a commit of `ref`, live or deleted) back through its parents, newest first, as
        far as the backend can read them."""
        return self.log(f"{ref}@{hash}", limit=1_000_000)

    def merged_run(self, run_id: str, into: str = MAIN, since: str | None = None) -> str | None:
        """When run `run_id`'s merge into `into` committed (ISO), looking back to `since`; None if it did not. The
        embedded catalog stamps the run in the merge's own transaction, so it has nothing to add; a catalog on a
        server answers from its log (a process killed between the server's merge and its own stamp did land)."""
        return None

    @abstractmethod
    def commit(self, spec: str) -> Commit:
        """The commit "ref@HASH" names (HASH: a unique prefix of 6+ hex digits, in the ref's history), or the
        ref's head for a plain "ref". RAT-CAT-010 if there is no such commit on that ref."""

    @abstractmethod
    def commit_at(self, ref: str, when: str) -> Commit:
        """The ref's commit in force at ISO time `when` (the newest at or before it). RAT-CAT-010 if none."""

    @abstractmethod
    def restore(self, ref: str, pointers: dict[str, str | None], expected: dict[str, str | None], message: str,
                meta: dict | None = None, in_tx: Callable[[Any, Commit], None] | None = None) -> Commit:
        """One new commit on `ref` that sets each table key to the given metadata location (None: the table is
        not on the ref), if each key still has its `expected` location (else RAT-CAT-003, nothing changed).
        History is never rewritten: a rollback is such a commit."""

    @abstractmethod
    def record_commit(self, ref: str, message: str, meta: dict | None = None) -> Commit:
        """Record the ref's current pointers as a new commit on top of its head, and move the head there.
        The run engine calls it after each table write on a branch."""

    # Conveniences with a default implementation on top of `iceberg()`.

    def load_table(self, ref: str, key: str) -> Table:
        """The table as it is now on `ref` (always freshly loaded), or as commit "ref@HASH" recorded it (read
        only). RAT-CAT-005 if absent."""
        from pyiceberg.exceptions import NoSuchTableError

        from ratui.engine.errors import RatuiError

        if split_spec(ref)[1] is not None:
            location = self.table_pointers(ref).get(key)
            if location is None:
                raise RatuiError("RAT-CAT-005", f"table '{key}' does not exist at {ref}")
            return self.static_table(location)
        catalog = self.iceberg(ref)
        namespace, name = split_key(key)
        try:
            return catalog.load_table(namespace + (name,))
        except NoSuchTableError:
            raise RatuiError("RAT-CAT-005", f"table '{key}' does not exist on '{ref}'") from None

    def static_table(self, location: str) -> Table:
        """A read-only table from one metadata file (a past state)."""
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(location)

    def table_exists(self, ref: str, key: str) -> bool:
        return key in self.table_pointers(ref)

    def create_table(
        self,
        ref: str,
        key: str,
        schema: Schema | pa.Schema,
        location: str | Path,
        partition_spec: PartitionSpec | None = None,
        properties: dict[str, str] | None = None,
    ) -> Table:
        """Create table `key` on `ref` at an explicit `location` (e.g. {project}/{namespace}/warehouse/{layer}/{name}),
        creating its namespace on that ref first if needed (namespaces are per ref)."""
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC

        catalog = self.iceberg(ref)
        namespace, name = split_key(key)
        self._ensure_namespace(catalog, namespace)
        return catalog.create_table(
            namespace + (name,),
            schema,
            location=str(location),
            partition_spec=partition_spec or UNPARTITIONED_PARTITION_SPEC,
            properties=properties or {},
        )

    def _ensure_namespace(self, catalog: Catalog, namespace: tuple[str, ...]) -> None:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError

        if not catalog.namespace_exists(namespace):
            try:
                catalog.create_namespace(namespace)
            except NamespaceAlreadyExistsError:
                pass  # created concurrently
