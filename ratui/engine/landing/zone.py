"""One interface for a landing zone, wherever its files are; `open_zone` finds the right one.

A `Zone` lists its active files as `ZoneEntry`s (a name relative to the zone and the identity the ledger compares:
size, modification time, and for an object its ETag and version), finds the files the ledger names (archived ones
included), stages what a run reads where Spark can read it (landing/files.py ZoneFile: a local file, a downloaded
copy, or an object Spark reads in place), archives what a run loaded to `_processed/{run_id}/`, lists and purges
the archive (the reaper's retention), and says which files a run read changed under it (the run calls `changed()`
after its Spark work and before its merge: a file read that is no longer as listed fails it with RAT-LND-010).

Which implementation a zone gets depends only on its URL: a zone named in ratui.yaml's `landing.zones` has the
URL written there (`s3://bucket/prefix`), any other is the project folder `{namespace}/landing/{zone}/`. A new
scheme is one module with a class like local.LocalZone or s3.S3Zone and its factory in SCHEMES. Whether Spark reads
an object-store zone in place or from a downloaded copy is the project's (Settings.zones_read_in_place: spark/
s3a.py's rule), given to the zone when it is opened.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from ratui.engine.errors import RatuiError
from ratui.engine.landing.entry import Progress, ZoneEntry, entry_of, zone_digest
from ratui.engine.landing.files import ZoneFile

__all__ = ["SCHEMES", "Progress", "Zone", "ZoneEntry", "ZoneFile", "configured_zones", "entry_of", "every_zone",
           "open_zone", "zone_digest"]



class Zone(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def noun(self) -> str:
        """What its files are called in messages: "file" or "object"."""

    @property
    def polled(self) -> bool:
        """The file watcher cannot see it: watch mode lists it every watch.poll_seconds."""

    @property
    def empty_hint(self) -> str | None:
        """How to put files into it (None: the error's own hint)."""

    @property
    def url(self) -> str: ...

    def where(self, name: str) -> str:
        """What a message names for one of its files: a path, or the object's URI."""

    def list(self) -> builtins.list[ZoneEntry]:
        """The active files at the zone's root, sorted by name."""

    def lookup(self, names: Iterable[str]) -> dict[str, ZoneEntry]:
        """The files of these names that exist now (active or archived names): name -> entry."""

    def processed(self) -> builtins.list[ZoneEntry]:
        """Everything under `_processed/`, names relative to the zone."""

    def stage(self, entries: builtins.list[ZoneEntry], staging: Path, progress: Progress | None = None,
              check: Callable[[], None] | None = None) -> dict[str, ZoneFile]:
        """What Spark reads for each of these entries, by name: the files themselves, copies under `staging`, or
        the objects where they are; `check()` raises to stop (a cancelled run)."""

    def archive(self, names: builtins.list[str], run_id: str) -> dict[str, ZoneEntry]:
        """Move these active files to `_processed/{run_id}/`: name -> the archived entry (gone ones left out)."""

    def archived_to(self, run_id: str) -> str:
        """Where archive() put a run's files, as the ledger records it."""

    def purge(self, entries: builtins.list[ZoneEntry]) -> set[str]:
        """Delete archived entries (unless rewritten since they were listed): the names deleted."""

    def changed(self, entries: builtins.list[ZoneEntry], removed: bool = False) -> builtins.list[tuple[ZoneEntry, str]]:
        """Entries a run read whose file is no longer as listed (size, time; an object's ETag and version), with
        what changed; `removed`: gone ones too. A zone whose reads were pinned to what was listed (staged
        objects) has none; objects Spark read in place are checked, gone ones always reported."""


def _s3(remote: Any, in_place: bool) -> Zone:
    from ratui.engine.landing.s3 import s3_zone  # boto3's client: loaded when a project has an s3:// zone

    return s3_zone(remote, in_place)


# the implementation of each URL scheme of ratui.yaml's landing.zones: scheme -> factory(remote zone, in_place)
# (in_place: Spark reads the zone's objects where they are); a factory imports its module when first called
SCHEMES: dict[str, Callable[[Any, bool], Zone]] = {
    "s3": _s3,
}


def open_zone(settings: Any, namespace: str, name: str, file: str | None = None) -> Zone:
    """The zone `namespace.name` of a project: the URL ratui.yaml gives it, else the project's folder (which must
    exist: RAT-LND-001 naming `file`, with the zones there are)."""
    remote = settings.remote_zone(namespace, name)
    if remote is not None:
        return _scheme(remote.url)(remote, settings.zones_read_in_place)
    from ratui.engine.landing.local import local_zone

    return local_zone(settings.root, namespace, name, file=file, locations=settings.locations())


def configured_zones(settings: Any) -> Iterator[Zone]:
    """Every zone ratui.yaml names with a URL (the ones a folder walk of the project cannot find)."""
    for remote in list(settings.remote_zones.values()):
        yield _scheme(remote.url)(remote, settings.zones_read_in_place)


def every_zone(settings: Any) -> Iterator[Zone]:
    """Every zone of the project: the folders under each `{namespace}/landing/`, then the configured ones."""
    from ratui.engine.landing.local import zones_on_disk

    yield from zones_on_disk(settings.root, settings.locations())
    yield from configured_zones(settings)


def _scheme(url: str) -> Callable[[Any, bool], Zone]:
    scheme = url.split("://", 1)[0] if "://" in url else ""
    target = SCHEMES.get(scheme)
    if target is None:
        raise RatuiError("RAT-CFG-007", f"landing zones at {scheme or url}:// URLs are not supported",
                         hint="Known: " + ", ".join(f"{s}://" for s in SCHEMES))
    return target
