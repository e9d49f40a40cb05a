"""Position deletes (Iceberg v2 merge-on-read): the rows of a data file that a later merge took out of the table.

A merge that changes a small share of a data file does not rewrite the file: it writes a position-delete file that
names the data file and the positions (0-based row ordinals, as Parquet counts them) of the rows that no longer
belong to the table, and adds the changed rows as new data files. ratui writes one delete file per data file per
merge, with the data file's path as both bounds of `file_path`, so every reader (ratui's Spark reads in read.py,
PyIceberg's own scans, any Iceberg engine) knows exactly which file it applies to.

The snapshot that adds delete files is written by `DeletesOverwrite`: PyIceberg 0.12 commits data files only, so
this producer writes the delete manifest itself and keeps the existing delete manifests (rewriting one only to drop
the delete files of data files the same commit removes).
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg import types as it
from pyiceberg.conversions import to_bytes
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile,
    ManifestWriter, ManifestWriterV2,
)
from pyiceberg.table.update.snapshot import _OverwriteFiles

# Iceberg's reserved field ids of a position-delete file's two columns
FILE_PATH_ID = 2147483546
POS_ID = 2147483545

DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID).encode()}),
])


def write_position_deletes(io: FileIO, folder: str, data_file: DataFile, positions: pa.Array) -> DataFile:
    """A position-delete file in `folder` (a local folder or an object store's prefix, written through the table's
    FileIO `io`) for `positions` of `data_file`; returns its DataFile entry."""
    positions = pa.compute.unique(positions.cast(pa.int64()))
    positions = positions.take(pa.compute.sort_indices(positions))
    n = len(positions)
    location = f"{folder.rstrip('/')}/delete-{uuid.uuid4().hex}.parquet"
    table = pa.table([pa.array([data_file.file_path] * n, pa.string()), positions], schema=DELETE_SCHEMA)
    with io.new_output(location).create() as stream:
        pq.write_table(table, stream)
        size = stream.tell()
    lo, hi = positions[0].as_py(), positions[-1].as_py()
    target = data_file.file_path.encode("utf-8")
    entry = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=data_file.partition,
        record_count=n,
        file_size_in_bytes=size,
        value_counts={FILE_PATH_ID: n, POS_ID: n},
        null_value_counts={FILE_PATH_ID: 0, POS_ID: 0},
        lower_bounds={FILE_PATH_ID: target, POS_ID: to_bytes(it.LongType(), lo)},
        upper_bounds={FILE_PATH_ID: target, POS_ID: to_bytes(it.LongType(), hi)},
    )
    entry.spec_id = _spec_of(data_file, 0)
    return entry


def _spec_of(f: DataFile, default: int) -> int:
    """The file's partition spec id (PyIceberg leaves it unset on entries it built from a Parquet footer)."""
    return getattr(f, "_spec_id", default)


def deleted_rows(deletes: list[DataFile] | tuple[DataFile, ...]) -> int:
    """Rows the delete files take out of their data file (ratui never deletes one position twice)."""
    return sum(d.record_count for d in deletes)


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class DeletesOverwrite(_OverwriteFiles):
    """An overwrite snapshot that may also add position-delete files (`append_data_file` with a DataFile of content
    POSITION_DELETES) and remove them (`delete_data_file`)."""

    def _writer_for(self, spec_id: int, content: ManifestContent) -> ManifestWriter:
        if content == ManifestContent.DELETES:
            return _DeleteManifestWriter(self.spec(spec_id), self.schema(), self.new_manifest_output(),
                                         self._snapshot_id, self._compression)
        return self.new_manifest_writer(self.spec(spec_id))

    def _write(self, spec_id: int, content: ManifestContent, entries: list[ManifestEntry]) -> ManifestFile:
        with self._writer_for(spec_id, content) as writer:
            for entry in entries:
                writer.add_entry(entry)
        return writer.to_manifest_file()

    def _deleted_entries(self) -> list[ManifestEntry]:
        """Tombstones (DELETED entries) for every removed file, data or delete; each must be in the parent."""
        parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id) \
            if self._parent_snapshot_id is not None else None
        found: list[ManifestEntry] = []
        if parent is not None and self._deleted_data_files:
            for manifest in parent.manifests(self._io):
                for entry in manifest.fetch_manifest_entry(self._io, discard_deleted=True):
                    if entry.data_file in self._deleted_data_files:
                        found.append(ManifestEntry.from_args(
                            status=ManifestEntryStatus.DELETED, snapshot_id=self._snapshot_id,
                            sequence_number=entry.sequence_number, file_sequence_number=entry.file_sequence_number,
                            data_file=entry.data_file))
        self._validate_required_deletes(found)
        return found

    def _manifests(self) -> list[ManifestFile]:
        groups: dict[tuple[int, ManifestContent], list[ManifestEntry]] = defaultdict(list)
        default = self._transaction.table_metadata.default_spec_id
        for f in self._added_data_files:
            content = ManifestContent.DATA if f.content == DataFileContent.DATA else ManifestContent.DELETES
            groups[(_spec_of(f, default), content)].append(ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id, sequence_number=None,
                file_sequence_number=None, data_file=f))
        for entry in self._deleted_entries():
            content = ManifestContent.DATA if entry.data_file.content == DataFileContent.DATA \
                else ManifestContent.DELETES
            groups[(_spec_of(entry.data_file, default), content)].append(entry)
        written = [self._write(spec_id, content, entries) for (spec_id, content), entries in groups.items()]
        return written + self._existing_manifests()

    def _existing_manifests(self) -> list[ManifestFile]:
        """The parent snapshot's manifests, each rewritten (with its own content) only when it lists a file this
        snapshot removes."""
        kept: list[ManifestFile] = []
        snapshot = self._transaction.table_metadata.snapshot_by_name(name=self._target_branch)
        if snapshot is None:
            return kept
        removed = {f.file_path for f in self._deleted_data_files}
        for manifest in snapshot.manifests(io=self._io):
            entries = manifest.fetch_manifest_entry(io=self._io, discard_deleted=True)
            stay = [e for e in entries if e.data_file.file_path not in removed]
            if len(stay) == len(entries):
                kept.append(manifest)
                continue
            if not stay:
                continue
            with self._writer_for(manifest.partition_spec_id, manifest.content) as writer:
                for e in stay:
                    writer.add_entry(ManifestEntry.from_args(
                        status=ManifestEntryStatus.EXISTING, snapshot_id=e.snapshot_id,
                        sequence_number=e.sequence_number, file_sequence_number=e.file_sequence_number,
                        data_file=e.data_file))
            kept.append(writer.to_manifest_file())
        return kept
