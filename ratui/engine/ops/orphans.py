"""Orphan data and metadata files: a mark-and-sweep over every live ref.

Files are shared between refs (a branch is a copy of pointers, not of files), so no cleanup may look at one ref
alone. The mark walks, for every table pointer of every ref in one consistent read of the catalog:

    the current metadata file, the previous one, and every metadata file of its metadata-log
    every snapshot's manifest list, its manifests, and every file those manifests hold (ADDED or EXISTING;
    see MARK_DELETED_ENTRIES for why tombstones are not counted)
    statistics files

On a Nessie server "every ref" is every branch and tag Nessie lists, those other Nessie clients made included, each
read at the hash one listing gave (nessie_tree.every_pointer), never one branch alone.

Every commit of a live branch inside the snapshot retention window is marked too (commit_pointers): a rollback or a
time-travel read may point at it again. (A Nessie tag's own state is marked whole, its past commits are not walked.)
A branch deleted inside the window counts as live until the window passes its deletion: its last state is marked
whole (undoing the deletion restores it) and its commits inside the window as a live branch's. So the files of a
dropped table (a commit without it) and of a deleted branch are reclaimed once no live ref, no kept commit inside
the window and no branch deleted inside it reaches them, never before; a file another ref shares is reached. Each
unreachable file is told apart for the preview (classify): a deleted branch's head reaches it, it lies in a table
folder nothing kept reads (a dropped table: its folders go with its last file), or neither (an orphan).

The sweep lists the files under each `{namespace}/warehouse/` and removes only those that no ref reaches AND
whose modification time is older than the threshold (a younger file may belong to a write that has not
committed yet), AND that are not in the data folder of a run still going (`data/run-{run_id}-*`). Each is checked
again just before it goes (still there, still old). Run staging folders (`{run_id}/` under a staging root) of runs
that are not going any more are swept by the same rule.

One sweep, two stores (`Store`): this machine's disk (`LocalStore`: symlinks never followed nor removed, nothing
outside the project or the shared warehouse folder deleted, folders left empty removed) and an s3:// warehouse's
bucket (`ObjectStore`: an object's mtime is its LastModified; only this project's `{warehouse}/{namespace}/warehouse/`
prefixes and the staging prefixes of this project's own runs, never another project's part of a shared bucket).
The mark names local files by their real path and objects by their URI in one spelling (`object_uri`: s3a:// and
s3n:// are s3://), which is how the listing names them too.

Why a single consistent read is enough: after it, new metadata only ever derives from metadata that existed at
that moment (a commit derives from the ref's pointer, a branch copies one, a merge copies a branch's), plus files
written afterwards - and those are younger than the threshold. If any live pointer cannot be read, what it
reaches is unknown and the sweep deletes nothing (RAT-RPR-002).
"""

from __future__ import annotations

import os
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ratui.engine.state.catalog.base import BranchCatalog, Pointer
from ratui.engine.errors import RatuiError
from ratui.engine.locations import ProjectLocations, plain_path
from ratui.engine.storage.warehouse import Warehouse
from ratui.engine.vocabulary import RUN_PREFIX

# Whether a manifest's DELETED entries (tombstones) count as reachable. They do not: a DELETED entry says the
# file is NOT in that snapshot; every snapshot that does hold a file lists it as ADDED or EXISTING in its own
# manifests, and the mark walks every snapshot of every live ref (Iceberg's own orphan-file removal reads live
# entries too). Counting tombstones would keep every replaced data file forever, because PyIceberg 0.12's
# overwrite (`update_snapshot().overwrite()`, what tables.commit_files uses) carries each commit's manifest of
# deleted entries into every later snapshot: after 4 overwrite commits the current snapshot still held
# tombstones for the 3 replaced files, so no snapshot expiry could ever free them.
MARK_DELETED_ENTRIES = False

# PyIceberg's TableProperties.METADATA_PREVIOUS_VERSIONS_MAX(_DEFAULT)
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
PREVIOUS_VERSIONS_MAX_DEFAULT = 100


def live_pointers(catalog: BranchCatalog) -> list[Pointer]:
    """Every table pointer of every ref, read at one instant where the backend can (catalog.every_pointer)."""
    return catalog.every_pointer()


def commit_pointers(catalog: BranchCatalog, since: str, skip: set[str] | frozenset[str] = frozenset()) -> list[Pointer]:
    """The table pointers of every kept commit inside the retention window: every commit of every live ref made at
    or after `since` (ISO, UTC), and the commit in force at `since` - what a rollback or a time-travel read inside
    the window can reach (the Marker keeps each one's metadata file and current snapshot).

    A branch deleted at or after `since` counts as a live one until the window passes it: its head is kept whole
    (`deleted`: what undoing the deletion restores), its commits inside the window as a live ref's are. A branch
    deleted before `since` keeps nothing (Nessie's GC keeps nothing of a deleted branch at all)."""
    out: list[Pointer] = []
    seen: set[tuple[str, str]] = set()

    def walk(name: str, commits: Iterable[Any]) -> None:
        for commit in commits:
            for key, location in commit.pointers.items():
                if (key, location) not in seen:
                    seen.add((key, location))
                    out.append(Pointer(f"{name}@{commit.hash}", key, location, past=True))
            if commit.created_at < since:
                break  # the state in force when the window opens: older ones are out of it

    for ref in catalog.list_refs():
        if ref.name not in skip:
            walk(ref.name, catalog.log(ref.name, limit=1_000_000))
    for gone in catalog.deleted_refs(since):
        out.extend(Pointer(f"{gone.name}@{gone.head}", key, location, deleted=True)
                   for key, location in sorted(gone.pointers.items()))
        walk(gone.name, catalog.history_from(gone.head, gone.name))
    return out


def deleted_heads(catalog: BranchCatalog) -> list[tuple[str, list[Pointer]]]:
    """Every deleted branch the catalog knows of, newest first, with its head's pointers (for telling which
    unreachable files a deleted branch left)."""
    return [(gone.name, [Pointer(f"{gone.name}@{gone.head}", key, location, deleted=True)
                         for key, location in sorted(gone.pointers.items())]) for gone in catalog.deleted_refs()]


def local_path(uri: str, locations: ProjectLocations | None = None) -> str | None:
    """A stored location -> this project's local path (after a move, see locations.py); None if remote."""
    if locations is None:
        return plain_path(uri)
    return None if plain_path(uri) is None else locations.local(uri)


# Hadoop's names of one object store: Spark or another engine may have written s3a:// where ratui writes s3://
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def object_uri(uri: str) -> str:
    """An object's URI in one spelling (s3a://b/k and s3n://b/k are s3://b/k), so a marked file matches its listing."""
    scheme, sep, rest = uri.partition("://")
    return f"{SCHEME_ALIASES.get(scheme.lower(), scheme.lower())}://{rest}" if sep else uri


class _RealPaths:
    """realpath() of a file, resolving only its folder (cached: a table has few folders, many files)."""

    def __init__(self) -> None:
        self._dirs: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        folder, name = os.path.split(path)
        real = self._dirs.get(folder)
        if real is None:
            real = self._dirs[folder] = os.path.realpath(folder)
        return os.path.join(real, name)


@dataclass
class MarkResult:
    files: set[str] = field(default_factory=set)  # real local paths and object URIs (object_uri) live refs reach
    tables: set[str] = field(default_factory=set)  # the folders (locations) of the tables read, named as `files`
    metadata_files: int = 0  # current metadata files read
    snapshots: int = 0
    manifests: int = 0


class Marker:
    """Collects the files live pointers reach. Manifests and manifest lists are immutable: each is read once."""

    def __init__(self, locations: ProjectLocations | None = None, properties: dict[str, str] | None = None) -> None:
        """`properties`: the FileIO's (BranchCatalog.file_io_properties: the project's path rules and the object
        store's settings); by default the path rules of `locations` alone."""
        self._locations = locations
        self._properties = properties if properties is not None else \
            (locations.file_io_properties() if locations else {})
        self._io: Any = None
        self._real = _RealPaths()
        self._manifest_files: dict[str, list[str]] = {}  # manifest path -> files it lists
        self._manifest_lists: dict[str, list[str]] = {}  # manifest list path -> manifest paths
        self._manifest_objects: dict[str, Any] = {}  # manifest path -> its ManifestFile

    def name_of(self, uri: str) -> str:
        """A stored location as the mark and the sweep's listing name it (a real local path, or an object URI)."""
        path = local_path(uri, self._locations)
        return self._real(path) if path is not None else object_uri(uri)

    def _add(self, result: MarkResult, uri: str | None) -> None:
        if uri:
            result.files.add(self.name_of(uri))

    def _file_io(self, location: str) -> Any:
        """One FileIO for every read (ratui's ProjectFileIO serves local paths and object URIs alike, and keeps one
        S3 connection pool), made on first use."""
        if self._io is None:
            from pyiceberg.io import load_file_io

            self._io = load_file_io(self._properties, location)
        return self._io

    def _exists(self, location: str) -> bool:
        path = local_path(location, self._locations)
        if path is not None:
            return os.path.exists(path)
        return self._file_io(location).new_input(location).exists()

    def mark(self, pointers: Iterable[Pointer], *,
             expire: dict[tuple[str, str], set[int]] | None = None) -> MarkResult:
        """The files `pointers` reach. `expire` simulates a snapshot expiry not yet committed (a dry run):
        for (ref, table) those snapshot ids are left out, and the metadata-log is what the expiry's new metadata
        file would hold (the current file appended, the oldest dropped past write.metadata.previous-versions-max).
        Raises RatuiError RAT-RPR-002 if a pointer's metadata or manifests cannot be read."""
        from pyiceberg.serializers import FromInputFile

        expire = expire or {}
        result = MarkResult()
        seen: set[tuple[str, frozenset[int], bool]] = set()
        for pointer in pointers:
            self._add(result, pointer.location)
            self._add(result, pointer.previous)
            if pointer.view:
                continue  # a view's metadata references no data files (ratui writes none)
            skip = frozenset(expire.get((pointer.ref, pointer.table), ()))
            if (pointer.location, skip, pointer.past) in seen or (pointer.past and (pointer.location, skip, False)
                                                                 in seen):
                continue  # another ref points at the very same metadata file: already walked (a live walk covers
                # a past one, never the other way round)
            seen.add((pointer.location, skip, pointer.past))
            try:
                if (pointer.past or pointer.deleted) and not self._exists(pointer.location):
                    continue  # a past commit (or a deleted branch) whose metadata file is gone: nothing to keep
                io = self._file_io(pointer.location)
                metadata = FromInputFile.table_metadata(io.new_input(pointer.location))
                result.metadata_files += 1
                result.tables.add(self.name_of(metadata.location.rstrip("/")))
                if pointer.past:
                    current = metadata.current_snapshot()
                    if current is not None:
                        self._snapshot(result, io, current)
                    continue
                log = [entry.metadata_file for entry in metadata.metadata_log]
                if skip:
                    keep = max(1, int(metadata.properties.get(PREVIOUS_VERSIONS_MAX, PREVIOUS_VERSIONS_MAX_DEFAULT)))
                    if len(log) >= keep:
                        log = log[len(log) - keep + 1:]
                    log.append(pointer.location)
                for entry in log:
                    self._add(result, entry)
                for stats in metadata.statistics:
                    if stats.snapshot_id not in skip:
                        self._add(result, stats.statistics_path)
                for partition_stats in metadata.partition_statistics:
                    self._add(result, partition_stats.statistics_path)
                for snapshot in metadata.snapshots:
                    if snapshot.snapshot_id not in skip:
                        self._snapshot(result, io, snapshot)
            except Exception as exc:  # a RatuiError too (its metadata outside the project): the ref and table named
                why = f"{exc.code}: {exc.message}" if isinstance(exc, RatuiError) else f"{type(exc).__name__}: {exc}"
                raise RatuiError(
                    "RAT-RPR-002",
                    f"cannot read table {pointer.table} on ref '{pointer.ref}' ({pointer.location}): {why}",
                    file=local_path(pointer.location, self._locations) or pointer.location,
                ) from exc
        result.manifests = len(self._manifest_files)
        return result

    def _snapshot(self, result: MarkResult, io: Any, snapshot: Any) -> None:
        """A snapshot's manifest list, its manifests and every file they hold."""
        result.snapshots += 1
        self._add(result, snapshot.manifest_list)
        for manifest_path in self._manifests(io, snapshot):
            self._add(result, manifest_path)
            for data_path in self._entries(io, manifest_path):
                self._add(result, data_path)

    def _manifests(self, io, snapshot) -> list[str]:
        paths = self._manifest_lists.get(snapshot.manifest_list)
        if paths is None:
            manifests = snapshot.manifests(io)
            for manifest in manifests:
                self._manifest_objects[manifest.manifest_path] = manifest
            paths = self._manifest_lists[snapshot.manifest_list] = [m.manifest_path for m in manifests]
        return paths

    def _entries(self, io, manifest_path: str) -> list[str]:
        files = self._manifest_files.get(manifest_path)
        if files is None:
            manifest = self._manifest_objects[manifest_path]
            entries = manifest.fetch_manifest_entry(io, discard_deleted=not MARK_DELETED_ENTRIES)
            files = self._manifest_files[manifest_path] = [entry.data_file.file_path for entry in entries]
        return files


def warehouse_roots(project_root: Path, namespaces: Iterable[str] | None = None) -> list[Path]:
    """Every `{namespace}/warehouse/` folder under `project_root` (real paths); only those of `namespaces` when
    given (a shared catalog.warehouse holds other projects' namespaces too: never swept from here)."""
    roots = []
    wanted = None if namespaces is None else set(namespaces)
    try:
        children = sorted(Path(project_root).iterdir())
    except FileNotFoundError:
        return []
    for child in children:
        if child.name.startswith(".") or not child.is_dir() or child.is_symlink() or \
                (wanted is not None and child.name not in wanted):
            continue
        warehouse = child / "warehouse"
        if warehouse.is_dir() and not warehouse.is_symlink():
            roots.append(Path(os.path.realpath(warehouse)))
    return roots


# ------------------------------------------------------------------------------------------------ stores


@dataclass(frozen=True)
class Listed:
    """A file under a swept root: its folders below the root, its path as the mark names it, size and mtime."""

    folders: tuple[str, ...]
    path: str
    size: int
    mtime: float


class Store(ABC):
    """Where the sweep lists and removes files: this machine's disk, or a bucket of an object store. The plan and
    its rules (reachable, young, a live run's folder) are the same for both; only these few operations differ."""

    @abstractmethod
    def listing(self, root: str) -> Iterator[Listed]:
        """Every regular file under `root`, in path order (nothing when `root` does not exist)."""

    @abstractmethod
    def stat(self, path: str) -> tuple[int, float] | None:
        """(size, mtime) of a regular file, None when it is gone (or is not a regular file)."""

    @abstractmethod
    def inside(self, path: str, root: str) -> bool:
        """Whether `path` really lies under `root` (what the reaper may delete)."""

    @abstractmethod
    def delete(self, path: str) -> bool:
        """Delete one file; False when it was gone already."""

    @abstractmethod
    def tidy(self, path: str, stop_at: Iterable[str], whole_folder: bool = False) -> None:
        """Remove what deleting `path` left empty, up to a root in `stop_at` (`data` and `metadata` folders too
        when `whole_folder`)."""


class LocalStore(Store):
    """Files on this machine's disk. Symbolic links are neither followed nor removed; a file is deleted only if it
    resolves inside the root it was planned under (the project, or the shared warehouse)."""

    def listing(self, root: str) -> Iterator[Listed]:
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            rel = tuple(os.path.relpath(folder, root).split(os.sep))
            for name in sorted(names):
                path = os.path.join(folder, name)
                found = self.stat(path)
                if found is not None:
                    yield Listed(rel, path, *found)

    def stat(self, path: str) -> tuple[int, float] | None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        return (st.st_size, st.st_mtime) if stat.S_ISREG(st.st_mode) else None

    def inside(self, path: str, root: str) -> bool:
        return ProjectLocations(root).inside(path)

    def delete(self, path: str) -> bool:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def tidy(self, path: str, stop_at: Iterable[str], whole_folder: bool = False) -> None:
        remove_empty_parents(Path(path).parent, [Path(p) for p in stop_at], names=() if whole_folder else KEEP_FOLDERS)


class ObjectStore(Store):
    """Objects of the warehouse's bucket (s3://bucket/key). An object's mtime is its LastModified. Listed, checked
    and deleted with boto3: pyarrow's S3FileSystem.delete_file writes an empty `folder/` marker object when it
    deletes the last object of a "folder" (measured), so every swept run folder would leave one behind forever."""

    def __init__(self, warehouse: Warehouse) -> None:
        assert warehouse.s3 is not None
        self._access = warehouse.s3
        self._client: Any = None

    def _s3(self):
        if self._client is None:
            self._client = self._access.client()
        return self._client

    def _split(self, uri: str) -> tuple[str, str]:
        bucket, _, key = object_uri(uri).split("://", 1)[1].partition("/")
        if bucket != self._access.bucket:
            raise RatuiError("RAT-RPR-001", f"{uri} is not in the warehouse's bucket '{self._access.bucket}'")
        return bucket, key

    def listing(self, root: str) -> Iterator[Listed]:
        bucket, prefix = self._split(root.rstrip("/") + "/")
        scheme = object_uri(root).split("://", 1)[0]
        try:
            pages = self._s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            objects = [o for page in pages for o in page.get("Contents", [])]
        except Exception as exc:
            raise self._access.error(exc, "list the warehouse's objects", root) from None
        for obj in sorted(objects, key=lambda o: o["Key"]):
            rel = obj["Key"][len(prefix):]
            if not rel or rel.endswith("/"):
                continue  # a folder marker (S3A and pyarrow write some): not a file of any table
            yield Listed(tuple(rel.split("/")[:-1]) or (".",), f"{scheme}://{bucket}/{obj['Key']}", int(obj["Size"]),
                         obj["LastModified"].timestamp())

    def stat(self, path: str) -> tuple[int, float] | None:
        bucket, key = self._split(path)
        try:
            head = self._s3().head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return None
            raise self._access.error(exc, "check an object before deleting it", path) from None
        return int(head["ContentLength"]), head["LastModified"].timestamp()

    def inside(self, path: str, root: str) -> bool:
        return object_uri(path).startswith(object_uri(root).rstrip("/") + "/")

    def delete(self, path: str) -> bool:
        bucket, key = self._split(path)
        try:
            self._s3().delete_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return False
            raise self._access.error(exc, "delete an orphan object", path) from None
        return True

    def tidy(self, path: str, stop_at: Iterable[str], whole_folder: bool = False) -> None:
        """Nothing: a bucket has no folders, only keys (a "folder" ends with its last object)."""


def _missing(exc: BaseException) -> bool:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound")


LOCAL = LocalStore()


# ------------------------------------------------------------------------------------------------- sweep


@dataclass(frozen=True)
class OrphanFile:
    path: str  # real local path, or an object's URI (s3://bucket/key)
    size: int
    mtime: float
    table_dir: str | None = None  # the table folder it lies in ({ns}/warehouse/{layer}/{name}), named as `path`
    table: str | None = None  # that folder's table key, "ns.layer.name"


# What left an unreachable file (classify): a table no kept state has any more, a deleted branch, or neither (a
# write that never committed, an expired snapshot's files, a replaced metadata file).
DROPPED_TABLE, DELETED_BRANCH, ORPHAN = "dropped_table", "deleted_branch", "orphan"
KINDS = (DROPPED_TABLE, DELETED_BRANCH, ORPHAN)


def table_folder(root: str, folders: tuple[str, ...]) -> tuple[str, str] | None:
    """(folder, key) of the table a file under table root `root` ({ns}/warehouse) lies in, by ratui's layout
    ({layer}/{name}/...); None for a file not that deep."""
    if len(folders) < 2 or folders[0] in (".", ""):
        return None
    base = root.rstrip("/")
    namespace = base.rsplit("/", 2)[-2] if base.count("/") >= 2 else ""
    folder = f"{base}/{folders[0]}/{folders[1]}"
    return (object_uri(folder) if "://" in folder else folder), f"{namespace}.{folders[0]}.{folders[1]}"


def classify(orphans: Iterable[OrphanFile], tables: set[str], deleted: Iterable[tuple[str, set[str]]]
             ) -> dict[str, tuple[str, str | None]]:
    """Each orphan's path -> (kind, what): DELETED_BRANCH and the branch when the head of a deleted branch (in
    `deleted`, newest first: name and the files its head reaches) reaches it; else DROPPED_TABLE and the table key
    when it lies in a table folder no marked pointer (`tables`, MarkResult.tables) reads; else ORPHAN."""
    pending = list(orphans)
    out: dict[str, tuple[str, str | None]] = {}
    for name, files in deleted:
        for orphan in pending:
            if orphan.path not in out and orphan.path in files:
                out[orphan.path] = (DELETED_BRANCH, name)
    for orphan in pending:
        if orphan.path in out:
            continue
        if orphan.table_dir is not None and orphan.table_dir not in tables:
            out[orphan.path] = (DROPPED_TABLE, orphan.table)
        else:
            out[orphan.path] = (ORPHAN, None)
    return out


@dataclass
class SweepPlan:
    orphans: list[OrphanFile] = field(default_factory=list)  # unreachable and older than the threshold
    reachable: int = 0
    young: int = 0  # unreachable but younger than the threshold
    protected: int = 0  # unreachable, in the data folder of a run still going
    foreign: int = 0  # unreachable, in the staging folder of a run this project does not know (a shared bucket)
    scanned: int = 0


def _run_folder_id(part: str) -> str | None:
    """'run-2605091234abcdef-1a2b3c4d' (a run's data folder) -> '2605091234abcdef'."""
    if not part.startswith(RUN_PREFIX):
        return None
    rest = part[4:]
    return rest.rsplit("-", 1)[0] if "-" in rest else rest


def plan_sweep(roots: Iterable[Path | str], reachable: set[str], *, older_than: float, live_runs: Iterable[str] = (),
               run_roots: Iterable[Path | str] = (), store: Store = LOCAL,
               own_run: Callable[[str], bool] | None = None) -> SweepPlan:
    """The files under `roots` that no live ref reaches, whose mtime is before `older_than` (a POSIX time),
    outside the data folders (`.../run-{run_id}-*/`) of `live_runs`. `run_roots` (also swept) hold one folder per
    run named by its id, e.g. the staging area `.ratui/staging/{run_id}/`: a live run's folder is spared, and so
    is the folder of a run `own_run` says is not this project's (a staging area other projects share)."""
    live = set(live_runs)
    plan = SweepPlan()
    by_run = {str(r) for r in run_roots}
    for root in [*map(str, roots), *by_run]:
        for entry in store.listing(root):
            place = None if root in by_run else table_folder(root, entry.folders)
            guarded = any(_run_folder_id(part) in live for part in entry.folders) if live else False
            foreign = False
            if root in by_run:
                guarded = guarded or entry.folders[0] in live
                foreign = own_run is not None and entry.folders[0] != "." and not own_run(entry.folders[0])
            plan.scanned += 1
            if entry.path in reachable:
                plan.reachable += 1
            elif guarded:
                plan.protected += 1
            elif foreign:
                plan.foreign += 1
            elif entry.mtime >= older_than:
                plan.young += 1
            else:
                plan.orphans.append(OrphanFile(entry.path, entry.size, entry.mtime, *(place or (None, None))))
    return plan


@dataclass
class SweepArea:
    """One store's share of the sweep: its table roots (`{namespace}/warehouse/`), its run roots (one folder per run
    id), and the fence every deletion must stay inside (the project, the shared warehouse folder, or the s3://
    warehouse)."""

    store: Store
    fence: Path | str
    roots: list[str] = field(default_factory=list)
    run_roots: list[str] = field(default_factory=list)
    own_run: Callable[[str], bool] | None = None

    def plan(self, reachable: set[str], *, older_than: float, live_runs: Iterable[str]) -> SweepPlan:
        return plan_sweep(self.roots, reachable, older_than=older_than, live_runs=live_runs,
                          run_roots=self.run_roots, store=self.store, own_run=self.own_run)

    def remove(self, orphan: OrphanFile, *, older_than: float, whole_folder: bool = False) -> int | None:
        """`whole_folder`: the file is a dropped table's, so its `data` and `metadata` folders go too once empty."""
        return remove_file(orphan.path, older_than=older_than, root=self.fence,
                           stop_at=[*self.roots, *self.run_roots], store=self.store, whole_folder=whole_folder)


KEEP_FOLDERS = {"data", "metadata"}


def remove_file(path: str, *, older_than: float, root: Path | str, stop_at: Iterable[Path | str] = (),
                store: Store = LOCAL, whole_folder: bool = False) -> int | None:
    """Delete one planned orphan if it is still old and really lies inside `root` (the project, the shared
    warehouse, or this project's part of a bucket; symlinks followed: the reaper never deletes anything outside);
    then the folders it leaves empty (never a `data` or `metadata` folder unless `whole_folder`, nor a root in
    `stop_at`). Returns the bytes freed, None if kept or gone."""
    if not store.inside(path, str(root)):
        return None
    found = store.stat(path)
    if found is None or found[1] >= older_than:
        return None  # rewritten since it was planned: leave it
    if not store.delete(path):
        return None
    store.tidy(path, [str(p) for p in stop_at], whole_folder=whole_folder)
    return found[0]


def remove_empty_parents(folder: Path, stop_at: Iterable[Path], keep: Callable[[Path], bool] | None = None,
                         names: Iterable[str] = KEEP_FOLDERS) -> None:
    stops = {os.path.realpath(p) for p in stop_at}
    kept_names = set(names)
    folder = Path(folder)
    while str(folder) not in stops and folder.name not in kept_names and not (keep and keep(folder)):
        if folder.parent == folder:
            return
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            return
        folder = folder.parent
