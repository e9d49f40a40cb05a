"""Compaction: data files whose position deletes take out a large share of their rows, rewritten without those rows.

Keyed writes put position deletes on files they change a little (merge-on-read, row_replacement.py); each later read
leaves those rows out, which costs a join. The reaper's `compaction` task rewrites every file of a table on main
whose deleted share has reached `reaper.compact_deleted_percent`: each such file is read with its deletes applied
and written again as one file (one task per file, no shuffle: its key range and partition stay as they were), and
one snapshot swaps the new files in and removes the old files with their delete files. The commit is guarded on
main's current snapshot, like every commit on main: if a run merged meanwhile, nothing changes and the next pass
tries again. A compaction killed before its commit leaves main as it was; its files are orphans for the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from ratui.engine.failpoints import failpoint
from ratui.engine.iceberg.read import data_files, deletes_of, live_rows, read_files
from ratui.engine.write.files import commit_files, discard, write_files


@dataclass
class Compactable:
    file: DataFile
    deleted: int  # rows its delete files take out
    delete_files: int

    @property
    def share(self) -> float:
        return self.deleted / self.file.record_count if self.file.record_count else 0.0


def plan_compaction(table: Table, min_share: float) -> list[Compactable]:
    """The table's data files whose deleted share is at least `min_share`."""
    out = []
    for f in data_files(table):
        deletes = deletes_of(table, f)
        if not deletes:
            continue
        item = Compactable(f, f.record_count - live_rows(table, f), len(deletes))
        if item.share >= min_share:
            out.append(item)
    return out


@dataclass
class Compacted:
    files_rewritten: int
    files_added: int
    delete_files_removed: int
    rows: int


def compact(session, table: Table, targets: list[Compactable], job_id: str, *, message: str) -> Compacted:
    """Rewrite `targets` without their deleted rows and commit one snapshot on the table's ref."""
    files = [t.file for t in targets]
    kept = read_files(session, table, files)
    written = write_files(read_files(session, table, []), table, job_id, keep=kept, keep_files=files)
    try:
        failpoint("kill:compact")
        commit_files(table, add=written.files, delete=files, message=message,
                     properties={"ratui.reaper": "compaction"})
    except BaseException:
        discard(written)
        raise
    return Compacted(len(files), len(written.files), sum(t.delete_files for t in targets), written.rows)
