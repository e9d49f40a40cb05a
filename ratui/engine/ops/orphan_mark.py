"""The mark of the orphan sweep (ops/orphans.py says why it is sound): every file the live refs, the kept commits
inside the retention window and the branches deleted inside it reach, read through each table pointer's metadata,
snapshots and manifests. Local files are named by their real path, objects by their URI in one spelling
(`object_uri`), which is how the sweep's listing names them too."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ratui.engine.errors import RatuiError
from ratui.engine.locations import ProjectLocations, plain_path
from ratui.engine.state.catalog.base import BranchCatalog, Pointer

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
