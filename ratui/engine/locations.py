"""Where files really are: the project's own folder, and nothing outside it unless ratui.yaml allows it.

Two jobs, one rule ("a path ratui touches resolves inside the project root or an allowed folder"):

- `ProjectLocations.check()` refuses a path whose real location (symlinks followed) lies outside the project
  root and every folder listed under `paths: {allow_outside: [...]}` in ratui.yaml (RAT-PTH-001, or RAT-PTH-002
  for a table's files). Discovery, landing zones, table writes and the reaper's deletions all ask it.
- Iceberg metadata stores absolute paths, so a copied or moved project would read and write the original's
  files. The state database remembers every root the project has lived at (`project_roots`); a stored path
  under an earlier root means the same file under the current root (`local()`). `catalog.fileio.ProjectFileIO`
  is PyIceberg's PyArrowFileIO with that mapping and that check on every read, write and delete, so PyIceberg
  itself can never open a file of another project.

Light on purpose (no PyIceberg): discovery uses it before the console's first paint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import unquote, urlparse

from ratui.engine.errors import RatuiError

ROOT_PROPERTY = "ratui.root"
EARLIER_ROOTS_PROPERTY = "ratui.earlier-roots"
ALLOWED_PROPERTY = "ratui.allow-outside"
FILE_IO_IMPL = "ratui.engine.state.catalog.fileio.ProjectFileIO"


def plain_path(uri: str) -> str | None:
    """A file URI or plain absolute path -> a normalised local path; None for a remote location (s3://...)."""
    if uri.startswith("file:"):
        path = unquote(urlparse(uri).path)
    elif "://" in uri:
        return None
    else:
        path = uri
    return os.path.normpath(path)


def within(path: str, folder: str) -> bool:
    """Whether the normalised `path` lies in `folder` (or is it)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class ProjectLocations:
    """The project root, the roots it lived at before, and the folders outside it that ratui.yaml allows."""

    def __init__(self, root: Path | str, earlier_roots: Iterable[str] = (), allowed: Iterable[Path | str] = ()):
        self.root = os.path.realpath(str(root))
        # longest first, so a root nested in another earlier root maps by its own prefix
        self.earlier = sorted({os.path.normpath(r) for r in earlier_roots} - {self.root}, key=len, reverse=True)
        self.allowed = tuple(os.path.realpath(str(a)) for a in allowed)
        self._real_dirs: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------ mapping

    def local(self, uri: str) -> str:
        """A stored location as a path of this project: a path under an earlier root moves to the current one.
        Remote locations (s3://...) come back unchanged."""
        path = plain_path(uri)
        if path is None:
            return uri
        for old in self.earlier:
            if within(path, old):
                return self.root + path[len(old.rstrip(os.sep)):]
        return path

    # ------------------------------------------------------------------------------------------- checks

    def real(self, path: str | Path) -> str:
        """realpath(), resolving each folder once: a folder's real path is its parent's joined with its name unless
        it is a symlink (a project has many folders under few parents, a table many files in few folders)."""
        folder, name = os.path.split(os.path.normpath(str(path)))
        target = os.path.join(self._real_dir(folder), name)
        return os.path.realpath(target) if os.path.islink(target) else target

    def _real_dir(self, folder: str) -> str:
        real = self._real_dirs.get(folder)
        if real is None:
            parent, name = os.path.split(folder)
            if not parent or not name or parent == folder or name in (".", ".."):
                real = os.path.realpath(folder)
            else:
                target = os.path.join(self._real_dir(parent), name)
                real = os.path.realpath(target) if os.path.islink(target) else target
            self._real_dirs[folder] = real
        return real

    def inside(self, path: str | Path) -> bool:
        real = self.real(path)
        return within(real, self.root) or any(within(real, a) for a in self.allowed)

    def check(self, path: str | Path, what: str, *, code: str = "RAT-PTH-001", file: str | None = None) -> None:
        """Raise `code` if `path` (followed through symlinks) leaves the project and every allowed folder."""
        if not self.inside(path):
            real = self.real(path)
            via = f" (a symlink to {real})" if os.path.normpath(str(path)) != real else ""
            raise RatuiError(code, f"{what} {path}{via} is outside the project {self.root}",
                             file=file or str(path))

    # --------------------------------------------------------------------------------------- properties

    def file_io_properties(self) -> dict[str, str]:
        """Catalog properties that make PyIceberg build a ProjectFileIO with this mapping."""
        return {
            "py-io-impl": FILE_IO_IMPL,
            ROOT_PROPERTY: self.root,
            EARLIER_ROOTS_PROPERTY: json.dumps(self.earlier),
            ALLOWED_PROPERTY: json.dumps(list(self.allowed)),
        }

    @classmethod
    def from_properties(cls, properties: dict[str, Any]) -> "ProjectLocations":
        return cls(properties[ROOT_PROPERTY], json.loads(properties.get(EARLIER_ROOTS_PROPERTY) or "[]"),
                   json.loads(properties.get(ALLOWED_PROPERTY) or "[]"))


def table_locations(table: Any) -> ProjectLocations | None:
    """The mapping a table was loaded with (None for a table loaded outside ratui's catalog)."""
    return getattr(getattr(table, "io", None), "locations", None)


def local_file(table: Any, uri: str) -> str:
    """A file of `table` as a local path of this project (mapped after a move, checked to be inside); an object
    store's URI (s3://...) as it is."""
    locations = table_locations(table)
    if locations is None or plain_path(uri) is None:
        return plain_path(uri) or uri
    path = locations.local(uri)
    locations.check(path, f"a file of table {'.'.join(table.name())}", code="RAT-PTH-002")
    return path
