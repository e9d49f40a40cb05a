"""A landing zone that is a folder of the project: `{namespace}/landing/{zone}/`.

Its files are read where they are (nothing is staged); archiving moves them to `_processed/{run_id}/` in the same
folder. A file or folder that is a symlink to a place outside the project (and outside every folder ratui.yaml
allows) is refused (RAT-PTH-001), a broken symlink is unreadable (RAT-LND-008): neither is silently left out.

A local file's bytes are digested (SHA-256, up to DIGEST_MAX_BYTES) when the ledger sees it new or changed, so a
file copied without its time (`cp -r`), touched or synced unchanged is still the same file (ledger.py).
"""

from __future__ import annotations

import builtins
import hashlib
import os
import shutil
import stat
import threading
from operator import attrgetter
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.landing.names import (
    INACTIVE_ENDS, INACTIVE_STARTS, PROCESSED, archived_name, check_file_name,
)
from ratui.engine.landing.entry import Progress, ZoneEntry, listed_entry, paused_gc
from ratui.engine.landing.files import ZoneFile
from ratui.engine.locations import ProjectLocations


def landing_folder(root: Path, namespace: str, zone: str) -> Path:
    return root / namespace / "landing" / zone


@dataclass(frozen=True)
class LocalZone:
    namespace: str
    name: str
    folder: Path
    locations: ProjectLocations | None = field(default=None, compare=False)
    noun = "file"
    polled = False  # the file watcher sees it
    empty_hint = None

    @property
    def url(self) -> str:
        return str(self.folder)

    def where(self, name: str) -> str:
        return str(self.folder / name)

    def active_files(self) -> builtins.list[Path]:
        """The paths of the active files (see list())."""
        return [e.path for e in self.list() if e.path is not None]

    def list(self) -> builtins.list[ZoneEntry]:
        """The active files at the zone's root, sorted by name: one os.scandir of the folder and one stat per file
        (a symlink's own check of where it leads; a plain file is where the folder is, checked once). A file
        removed while the folder is listed is left out; a broken symlink is RAT-LND-008, a name that is not
        valid UTF-8 RAT-LND-012 (neither is silently left out).

        The folder is opened once and scanned through its descriptor, so each file's stat looks up one name in
        it rather than walking the folder's whole path again (100,000 files: 15-25% of the listing)."""
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            return []
        try:
            return self._list(fd)
        finally:
            os.close(fd)

    def _list(self, fd: int) -> builtins.list[ZoneEntry]:
        scan = os.scandir(fd)  # entries' `path` is then their bare name: errors name self.folder / name
        locations = self.locations
        # every file is checked when the folder itself lies elsewhere; else only symlinks, which may lead out
        check_all = locations is not None and not locations.inside(self.folder / "_")
        child = _child_maker(self.folder)
        make, regular = listed_entry, stat.S_ISREG
        found = []
        starts, ends = INACTIVE_STARTS, INACTIVE_ENDS
        with scan, paused_gc():
            for item in scan:
                name = item.name
                # is_active_name, inlined (a call per file counts at 100,000): a folder entry's name is never
                # empty and holds no "/"
                if name.startswith(starts) or name.endswith(ends):
                    continue
                link = False
                try:
                    link = item.is_symlink()
                    st = item.stat()  # follows a symlink
                except FileNotFoundError:
                    if not link:
                        continue  # removed while the folder was listed
                    where = str(child(name))
                    raise RatuiError("RAT-LND-008", f"landing file '{name}' in zone '{self.name}' is a broken "
                                     f"symlink (to {_readlink(where)})", file=where) from None
                except OSError as exc:  # a symlink loop, a place this user may not look into
                    where = str(child(name))
                    raise RatuiError("RAT-LND-008", f"landing file '{name}' in zone '{self.name}' cannot be looked "
                                     f"at: {exc.strerror or exc}" + (f" (a symlink to {_readlink(where)})"
                                                                      if link else ""), file=where) from None
                if not regular(st.st_mode):
                    continue
                if not name.isprintable():  # check_file_name's own first test, inlined
                    check_file_name(name, self.name, str(self.folder))
                if locations is not None and (link or check_all):
                    locations.check(child(name), "landing file")
                found.append(make((name, st.st_size, st.st_mtime_ns, None, None, child)))
        found.sort(key=_BY_NAME)
        return found

    def lookup(self, names: Iterable[str]) -> dict[str, ZoneEntry]:
        out = {}
        for name in names:
            path = self.folder / name
            if path.is_file():
                entry = _entry(path, name)
                if entry is not None:
                    out[name] = entry
        return out

    def processed(self) -> builtins.list[ZoneEntry]:
        """Regular files under `_processed/` (never through a symlink)."""
        processed = self.folder / PROCESSED
        if processed.is_symlink() or not processed.is_dir():
            return []
        out = []
        for folder, _dirs, names in os.walk(processed):
            for name in names:
                path = Path(folder) / name
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    out.append(ZoneEntry(path.relative_to(self.folder).as_posix(), st.st_size, st.st_mtime_ns,
                                         path=path))
        return sorted(out, key=lambda e: e.name)

    def stage(self, entries: builtins.list[ZoneEntry], staging: Path, progress: Progress | None = None,
              check: Callable[[], None] | None = None) -> dict[str, ZoneFile]:
        return {e.name: ZoneFile(self.folder / e.name, e.name) for e in entries}

    def archive(self, names: builtins.list[str], run_id: str) -> dict[str, ZoneEntry]:
        target = self.folder / PROCESSED / run_id
        target.mkdir(parents=True, exist_ok=True)
        moved = {}
        for name in names:
            source = self.folder / name
            if source.exists():
                shutil.move(str(source), str(target / name))
                entry = _entry(target / name, archived_name(run_id, name))
                if entry is not None:
                    moved[name] = entry
        return moved

    def archived_to(self, run_id: str) -> str:
        # relative to the project (the zone folder is {root}/{namespace}/landing/{zone})
        return str((self.folder / PROCESSED / run_id).relative_to(self.folder.parents[2]))

    def purge(self, entries: builtins.list[ZoneEntry]) -> set[str]:
        """Delete archived files that are still as listed and really inside the project (symlinks followed: never
        anything outside it), then the folders they leave empty up to `_processed/` (which stays)."""
        done = set()
        stop = os.path.realpath(self.folder / PROCESSED)
        for e in entries:
            path = self.folder / e.name
            if self.locations is not None and not self.locations.inside(str(path)):
                continue
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or st.st_mtime_ns > e.mtime_ns:
                    continue  # rewritten since it was listed: leave it
                os.unlink(path)
            except FileNotFoundError:
                continue
            done.add(e.name)
            folder = path.parent
            while os.path.realpath(folder) != stop and folder != folder.parent:
                try:
                    folder.rmdir()  # only when empty
                except OSError:
                    break
                folder = folder.parent
        return done

    def changed(self, entries: builtins.list[ZoneEntry], removed: bool = False) -> builtins.list[tuple[ZoneEntry, str]]:
        out = []
        for e in entries:
            try:
                st = (self.folder / e.name).stat()
            except OSError:  # gone (or no longer readable)
                if removed:
                    out.append((e, "removed"))
                continue
            if st.st_size != e.size:
                out.append((e, f"{e.size:,} -> {st.st_size:,} bytes"))
            elif st.st_mtime_ns != e.mtime_ns:
                out.append((e, "rewritten"))
        return out


_BY_NAME = attrgetter("name")


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _child_maker(folder: Path) -> Callable[[str], Path]:
    """A fast `folder / name` for names straight from a listing (pathlib's own shortcut for its iterdir, where
    the Python has it: building 100,000 Paths the plain way costs more than listing them)."""
    fast = getattr(folder, "_make_child_relpath", None)
    if fast is not None:
        try:
            if fast("x") == folder / "x":
                return fast
        except Exception:  # a Python whose private helper works otherwise
            pass
    return folder.joinpath


def _entry(path: Path, name: str) -> ZoneEntry | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return ZoneEntry(name, st.st_size, st.st_mtime_ns, path=path)


def local_zone(root: Path, namespace: str, zone: str, file: str | None = None,
               locations: ProjectLocations | None = None) -> LocalZone:
    """The zone folder, which must exist (RAT-LND-001 naming `file`, with the zones there are) and lie inside the
    project or a folder ratui.yaml allows (RAT-PTH-001)."""
    if not zone or "/" in zone or "\\" in zone or zone.startswith((".", "_")):
        raise RatuiError("RAT-LND-001", f"'{zone[:40]}' is not a landing zone name", file=file)
    folder = landing_folder(root, namespace, zone)
    if not folder.is_dir():
        known = [p.name for p in _zone_dirs(root / namespace / "landing")]
        raise RatuiError("RAT-LND-001", f"landing zone '{zone}' does not exist in namespace '{namespace}'", file=file,
                         hint=did_you_mean(zone, known) if known else None)
    locations = locations or ProjectLocations(root)
    locations.check(root / namespace / "landing", "landing folder")
    locations.check(folder, f"landing zone '{zone}'")
    return LocalZone(namespace, zone, folder, locations)


def zones_on_disk(root: Path, locations: ProjectLocations | None = None) -> Iterator[LocalZone]:
    """Every zone folder of the project (`{namespace}/landing/{zone}/`), never through a symlinked landing folder."""
    real = Path(os.path.realpath(root))
    for ns in sorted(real.iterdir()) if real.is_dir() else []:
        landing = ns / "landing"
        if ns.name.startswith(".") or not landing.is_dir() or landing.is_symlink():
            continue
        for zone in sorted(landing.iterdir()):
            if zone.is_dir():
                yield LocalZone(ns.name, zone.name, zone, locations or ProjectLocations(real))


def _zone_dirs(folder: Path) -> builtins.list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


DIGEST_MAX_BYTES = 256 << 20  # bigger local files are told apart by size and time only
_READ_WHOLE = 1 << 20  # files up to this size are digested from one read
_DIGESTS: "OrderedDict[tuple, str | None]" = OrderedDict()  # (path, size, mtime_ns, inode) -> digest
_DIGESTS_LOCK = threading.Lock()


def file_digest(path: Path, size: int, mtime_ns: int) -> str | None:
    """SHA-256 of a local landing file's bytes (None over DIGEST_MAX_BYTES, or when it cannot be read: the
    run's read reports that), remembered per path, size, time and inode for the pipelines sharing a zone."""
    if size > DIGEST_MAX_BYTES:
        return None
    try:
        where = os.fspath(path)
        key = (where, size, mtime_ns, os.stat(where).st_ino)
        with _DIGESTS_LOCK:
            if key in _DIGESTS:
                return _DIGESTS[key]
        if size <= _READ_WHOLE:  # a small file in one read (file_digest allocates a 256 KB buffer per file)
            with open(where, "rb", buffering=0) as raw:
                digest = hashlib.sha256(raw.readall()).hexdigest()
        else:
            with open(where, "rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest
        while len(_DIGESTS) > 4096:
            _DIGESTS.popitem(last=False)
    return digest
