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

Here: the sweep's plan (what is unreachable and old, what left it) and the removal; the mark is orphan_mark.py,
the two stores orphan_stores.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ratui.engine.ops.orphan_mark import object_uri
from ratui.engine.ops.orphan_stores import LOCAL, Store
from ratui.engine.vocabulary import RUN_PREFIX


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
