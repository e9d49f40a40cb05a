"""Landing zones in S3-compatible object storage (AWS S3, MinIO, moto's server...), through boto3.

A zone `s3://bucket/prefix/` holds objects the way a local zone folder holds files: the objects directly under the
prefix are the zone's active files (never `_processed/`, `_samples/`, hidden names or editor droppings: the same
rule as a local folder), and a run archives what it loaded to `prefix/_processed/{run_id}/` (copy, then delete,
after the merge).

Spark reads a zone's objects one of two ways (landing.s3_read; spark/s3a.py reads_in_place decides):

    in place  Spark reads `s3://bucket/key` itself (Hadoop's S3A connector): nothing is downloaded. ratui's own
              checks of the bytes (landing/reader.py) read ranged GETs pinned to the listed ETag (S3Object), and
              after the run's Spark work, before its merge, `changed()` lists the zone again: an object whose ETag
              (or version) is no longer the listed one, or that is gone, fails the run (RAT-LND-010), because
              Spark's own reads are not pinned to ratui's listing. S3A's change detection (storage/s3.py) fails a
              read during which the object changes.
    staged    the run downloads the objects it reads into its own staging folder under `.ratui/` (a bounded pool
              of downloads, with progress) and Spark reads them there (pyspark alone has no S3A; the staging
              folder goes with the run). Each fetch asks for exactly the version it listed (`IfMatch` on the
              ETag, and the version id on a versioned bucket): an object rewritten between listing and fetch is an
              error, never a silent mix; what was read is pinned, so `changed()` has nothing to say.

This is the `Zone` of landing/zone.py for the `s3://` scheme.

Credentials come from boto3's standard chain (environment, shared profile, instance role) or the zone's keys;
`profile`, `region`, `endpoint_url`, `path_style` and keys may be set per zone or for all zones in ratui.yaml
(storage/s3.py S3Access: boto3 and Spark's S3A get the same). Network failures are bounded
(connect and read timeouts, a few retries) and become coded errors naming the zone's URL:

    RAT-S3-001  the endpoint cannot be reached
    RAT-S3-002  credentials missing or refused
    RAT-S3-003  the bucket does not exist
    RAT-S3-004  an object changed or vanished while it was being fetched or read
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile
from ratui.engine.landing.names import PROCESSED, archived_name, check_file_name, is_active_name, is_archived_name
from ratui.engine.landing.entry import Progress, ZoneEntry
from ratui.engine.storage.s3 import S3Access

log = logging.getLogger("ratui.s3")

CHUNK = 1 << 20


class S3Zone:
    """Listing, staging (or reading in place) and archiving the objects of one zone. Thread-safe (boto3 clients
    are). An object's `mtime_ns` is its LastModified. The client's timeouts and retries are bounded (storage/s3.py):
    a dead endpoint fails a run in seconds, not minutes."""

    noun = "object"
    polled = True  # no file watcher sees a bucket: watch mode lists it every watch.poll_seconds
    empty_hint = "Upload files under the zone's prefix (objects under _processed/ and _samples/ are never read)."

    def __init__(self, bucket: str, prefix: str, *, endpoint_url: str | None = None, region: str | None = None,
                 profile: str | None = None, concurrency: int = 8, name: str = "", namespace: str = "",
                 path_style: bool | None = None, access_key_id: str | None = None,
                 secret_access_key: str | None = None, in_place: bool = False):
        """`in_place`: Spark reads the objects from the bucket (stage() downloads nothing)."""
        self.namespace = namespace
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint_url = endpoint_url
        self.access = S3Access(bucket, endpoint_url, region, profile, path_style, access_key_id, secret_access_key)
        self.concurrency = max(1, concurrency)
        self.name = name
        self.in_place = in_place
        self._client: Any = None
        self._lock = threading.Lock()
        self._versioned: bool | None = None

    @classmethod
    def of(cls, zone, in_place: bool = False) -> "S3Zone":
        """From settings.RemoteZone."""
        return cls(zone.bucket, zone.prefix, endpoint_url=zone.endpoint_url, region=zone.region,
                   profile=zone.profile, concurrency=zone.concurrency, name=zone.name, namespace=zone.namespace,
                   path_style=zone.path_style, access_key_id=zone.access_key_id,
                   secret_access_key=zone.secret_access_key, in_place=in_place)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{name}"

    where = uri

    # ------------------------------------------------------------------------------------------ client

    @property
    def client(self):
        """boto3's client for the zone's bucket, with the addressing and key Spark's S3A gets for it too."""
        with self._lock:
            if self._client is None:
                try:
                    self._client = self.access.client(pool=max(10, self.concurrency))
                except RatuiError as exc:  # a profile boto3 does not know
                    raise RatuiError(exc.code, f"zone '{self.name}': {exc.message}", file=self.url) from None
            return self._client

    def _error(self, exc: Exception, what: str, key: str | None = None) -> RatuiError:
        """A boto3/botocore failure as a coded error naming the zone (or the object)."""
        from botocore import exceptions as bex

        where = f"s3://{self.bucket}/{key}" if key else self.url
        endpoint = self.access.endpoint  # never with a user or password
        if isinstance(exc, RatuiError):
            return exc
        if isinstance(exc, (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError,
                            bex.ConnectionClosedError)) or isinstance(exc, bex.HTTPClientError):
            return RatuiError("RAT-S3-001", f"cannot reach {endpoint} to {what} of zone '{self.name}': "
                              f"{_first_line(exc)}", file=where)
        if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError)):
            return RatuiError("RAT-S3-002", f"no AWS credentials to {what} of zone '{self.name}'", file=where)
        if isinstance(exc, bex.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("NoSuchBucket",):
                return RatuiError("RAT-S3-003", f"bucket '{self.bucket}' of zone '{self.name}' does not exist "
                                  f"at {endpoint}", file=where)
            if code in ("NoSuchKey", "PreconditionFailed", "NoSuchVersion", "404", "412") or status in (404, 412):
                return RatuiError("RAT-S3-004", f"object {where} changed or vanished while ratui was reading it "
                                  f"({code or status})", file=where)
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken",
                        "InvalidToken", "AuthorizationHeaderMalformed", "403") or status == 403:
                return RatuiError("RAT-S3-002", f"{endpoint} refused the credentials to {what} of zone "
                                  f"'{self.name}' ({code or status})", file=where)
            return RatuiError("RAT-S3-001", f"{endpoint} failed to {what} of zone '{self.name}': "
                              f"{_first_line(exc)}", file=where)
        if isinstance(exc, bex.BotoCoreError):
            return RatuiError("RAT-S3-001", f"cannot {what} of zone '{self.name}': {_first_line(exc)}", file=where)
        if isinstance(exc, OSError):  # a local disk problem while staging: the run fails, coded
            return RatuiError("RAT-S3-001", f"cannot {what} of zone '{self.name}': {exc}", file=where)
        raise exc

    # ------------------------------------------------------------------------------------------ listing

    def versioned(self) -> bool:
        if self._versioned is None:
            from botocore import exceptions as bex

            try:
                status = self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")
                self._versioned = status == "Enabled"
            except bex.ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code == "AccessDenied":  # allowed to read objects but not to ask: take the latest versions
                    self._versioned = False
                else:
                    raise self._error(exc, "list the objects") from None
            except Exception as exc:
                raise self._error(exc, "list the objects") from None
        return self._versioned

    def list(self) -> builtins.list[ZoneEntry]:
        """The zone's active objects (directly under the prefix)."""
        return self._list("")

    def processed(self) -> builtins.list[ZoneEntry]:
        return self._list(PROCESSED + "/")

    def lookup(self, names: Iterable[str]) -> dict[str, ZoneEntry]:
        names = set(names)
        found = {e.name: e for e in self.list() if e.name in names}
        if any(n not in found for n in names):
            found.update({e.name: e for e in self.processed() if e.name in names})
        return found

    def _list(self, under: str) -> builtins.list[ZoneEntry]:
        """The objects directly under the prefix (active names only), or with `under` (e.g. "_processed/") every
        object below that folder of the zone, names relative to the zone. Paginated: any number of objects."""
        deep = bool(under)
        try:
            versioned = self.versioned()
            client = self.client
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + under}
            if not deep:
                kwargs["Delimiter"] = "/"
            found: builtins.list[ZoneEntry] = []
            if versioned:
                for page in client.get_paginator("list_object_versions").paginate(**kwargs):
                    for item in page.get("Versions", []):
                        if item.get("IsLatest"):
                            found.append(self._entry(item, item.get("VersionId")))
            else:
                for page in client.get_paginator("list_objects_v2").paginate(**kwargs):
                    for item in page.get("Contents", []):
                        found.append(self._entry(item, None))
        except RatuiError:
            raise
        except Exception as exc:
            raise self._error(exc, "list the objects") from None
        out = [f for f in found if f.name and (deep or is_active_name(f.name))]
        for f in out:
            check_file_name(f.name, self.name, self.url)
        return sorted(out, key=lambda f: f.name)

    def _entry(self, item: dict[str, Any], version: str | None) -> ZoneEntry:
        modified = item["LastModified"]
        return ZoneEntry(name=item["Key"][len(self.prefix):], size=int(item.get("Size", 0)),
                          mtime_ns=int(modified.timestamp() * 1_000_000) * 1000,
                          etag=str(item.get("ETag", "")).strip('"'),
                          version=version if version and version != "null" else None)

    def check(self) -> None:
        """Reach the bucket once (list one key): a coded error when the endpoint, credentials or bucket fail."""
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
        except Exception as exc:
            raise self._error(exc, "list the objects") from None

    # ------------------------------------------------------------------------------------------ fetching

    def stage(self, entries: builtins.list[ZoneEntry], staging: Path, progress: Progress | None = None,
              check: Callable[[], None] | None = None) -> dict[str, ZoneFile]:
        """In place: each object as Spark reads it from the bucket (nothing downloaded). Staged: the objects
        downloaded under `staging/s3/{zone}/` (see fetch())."""
        if self.in_place:
            return {e.name: ZoneFile(None, e.name, source=S3Object(self, e), spark_uri=self.uri(e.name))
                    for e in entries}
        paths = self.fetch(entries, staging / "s3" / self.name, progress, check)
        listed = {e.name: e for e in entries}
        # a copy fetched pinned to the listed ETag (or version) holds that object's bytes: its identity is the
        # object's, so a rerun's new copy of an unchanged object finds what the last one's checks found
        return {name: ZoneFile(path, name, origin=self.uri(name), pinned=S3Object(self, listed[name]).identity
                               if listed[name].etag or listed[name].version else None)
                for name, path in paths.items()}

    def fetch(self, files: Iterable[ZoneEntry], dest: Path, progress: Progress | None = None,
              check: Callable[[], None] | None = None) -> dict[str, Path]:
        """Download `files` under `dest` (keeping their relative names), `concurrency` at a time. Each is fetched
        exactly as listed (ETag, version); returns name -> local path. `progress(done, total, bytes)` is called
        from the downloading threads, at most every quarter second and once at the end; `check()` before each
        download (it raises to stop: a cancelled run stops fetching)."""
        files = list(files)
        total = len(files)
        done = [0, 0]
        last = [0.0]
        lock = threading.Lock()

        def one(entry: ZoneEntry) -> tuple[str, Path]:
            if check is not None:
                check()
            target = dest / entry.name
            target.parent.mkdir(parents=True, exist_ok=True)
            key = self.prefix + entry.name
            args: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
            if entry.version:
                args["VersionId"] = entry.version
            elif entry.etag:
                args["IfMatch"] = f'"{entry.etag}"'
            try:
                response = self.client.get_object(**args)
                body = response["Body"]
                partial = target.with_name(target.name + ".part")
                with open(partial, "wb") as out:
                    for chunk in body.iter_chunks(CHUNK):
                        out.write(chunk)
                os.replace(partial, target)
            except RatuiError:
                raise
            except Exception as exc:
                raise self._error(exc, "fetch an object", key) from None
            if target.stat().st_size != entry.size:
                raise RatuiError("RAT-S3-004", f"object s3://{self.bucket}/{key} arrived with "
                                 f"{target.stat().st_size} bytes, listed with {entry.size}", file=f"s3://{self.bucket}/{key}")
            # the file keeps the object's time: errors and notes that mention it read like the object's
            os.utime(target, ns=(entry.mtime_ns, entry.mtime_ns))
            with lock:
                done[0] += 1
                done[1] += entry.size
                now = time.monotonic()
                if progress is not None and (now - last[0] >= 0.25 or done[0] == total):
                    last[0] = now
                    progress(done[0], total, done[1])
            return entry.name, target

        if not files:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.concurrency, total),
                                thread_name_prefix=f"ratui-s3-{self.name}") as pool:
            return dict(pool.map(one, files))

    # ------------------------------------------------------------------------------------------ archiving

    def archived_to(self, run_id: str) -> str:
        return f"{self.url}{PROCESSED}/{run_id}"

    def archive(self, names: builtins.list[str], run_id: str) -> dict[str, ZoneEntry]:
        """Copy each object (as listed now) to `_processed/{run_id}/` and delete the original (after a merge).
        Returns name -> the archived object; an object already gone is left out. A failure raises after what was
        done."""
        from botocore import exceptions as bex

        listed = {f.name: f for f in self.list()}

        def one(entry: ZoneEntry) -> tuple[str, ZoneEntry | None]:
            key = self.prefix + entry.name
            target = self.prefix + archived_name(run_id, entry.name)
            source: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
            if entry.version:
                source["VersionId"] = entry.version
            try:
                if entry.size < 5 * 1024 ** 3:
                    result = self.client.copy_object(Bucket=self.bucket, Key=target, CopySource=source)
                    copied = result.get("CopyObjectResult", {})
                    etag = str(copied.get("ETag", "")).strip('"')
                    modified = copied.get("LastModified")
                    version = result.get("VersionId")
                else:  # beyond a single copy request: boto3's managed multipart copy
                    self.client.copy(source, self.bucket, target)
                    head = self.client.head_object(Bucket=self.bucket, Key=target)
                    etag, modified = str(head.get("ETag", "")).strip('"'), head.get("LastModified")
                    version = head.get("VersionId")
                self.client.delete_object(Bucket=self.bucket, Key=key)
            except bex.ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code in ("NoSuchKey", "404"):
                    return entry.name, None  # moved already (another run archived it)
                raise self._error(exc, "archive an object", key) from None
            except Exception as exc:
                raise self._error(exc, "archive an object", key) from None
            mtime_ns = int(modified.timestamp() * 1_000_000) * 1000 if modified is not None else entry.mtime_ns
            return entry.name, ZoneEntry(archived_name(run_id, entry.name), entry.size, mtime_ns, etag,
                                         version if version and version != "null" else None)

        files = [listed[n] for n in names if n in listed]
        if not files:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(files)),
                                thread_name_prefix=f"ratui-s3-{self.name}") as pool:
            return {name: moved for name, moved in pool.map(one, files) if moved is not None}

    def purge(self, entries: builtins.list[ZoneEntry]) -> set[str]:
        return self.delete(e.name for e in entries)

    def changed(self, entries: builtins.list[ZoneEntry], removed: bool = False) -> builtins.list[tuple[ZoneEntry, str]]:
        """Staged: none (each fetch asked for the object exactly as listed: what was read is pinned). In place:
        the objects whose ETag or version is no longer the listed one, from one listing of the zone (a request
        per archived object a rebuild read), and the ones gone: Spark may have read a replacement before the
        object went. One gone because a run archived it (a copy under `_processed/` with the listed ETag) held
        the listed bytes until it went, so a read that succeeded read them: it counts only with `removed`."""
        if not self.in_place or not entries:
            return []
        archived = [e.name for e in entries if is_archived_name(e.name)]
        now = {e.name: e for e in self.list()} if len(archived) < len(entries) else {}
        if archived:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(archived)),
                                    thread_name_prefix=f"ratui-s3-{self.name}") as pool:
                now.update({e.name: e for e in pool.map(self.head, archived) if e is not None})
        out = []
        for e in entries:
            found = now.get(e.name)
            if found is None:
                out.append((e, "removed"))
            elif found.etag != e.etag or (e.version is not None and found.version != e.version):
                out.append((e, f"{e.size:,} -> {found.size:,} bytes" if found.size != e.size else "rewritten"))
        gone = [e for e, how in out if how == "removed" and not is_archived_name(e.name)]
        if gone and not removed:
            moved = {(f.base_name, f.etag) for f in self.processed()}
            out = [(e, how) for e, how in out if not (how == "removed" and (e.base_name, e.etag) in moved)]
        return out

    def head(self, name: str) -> ZoneEntry | None:
        """The object of this name as it is now (its latest version), or None when there is none."""
        from botocore import exceptions as bex

        key = self.prefix + name
        try:
            item = self.client.head_object(Bucket=self.bucket, Key=key)
        except bex.ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404 or str(exc.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey"):
                return None
            raise self._error(exc, "check an object", key) from None
        except Exception as exc:
            raise self._error(exc, "check an object", key) from None
        version = item.get("VersionId")
        return ZoneEntry(name, int(item.get("ContentLength", 0)),
                         int(item["LastModified"].timestamp() * 1_000_000) * 1000,
                         str(item.get("ETag", "")).strip('"'), version if version and version != "null" else None)

    def delete(self, names: Iterable[str]) -> set[str]:
        """Delete objects of the zone by name (the reaper's retention of archived files). Returns the names
        deleted."""
        names = list(names)
        done: set[str] = set()
        try:
            for start in range(0, len(names), 1000):
                batch = names[start:start + 1000]
                result = self.client.delete_objects(Bucket=self.bucket, Delete={
                    "Objects": [{"Key": self.prefix + n} for n in batch], "Quiet": True})
                failed = {str(e.get("Key", ""))[len(self.prefix):] for e in result.get("Errors", [])}
                done.update(n for n in batch if n not in failed)
        except Exception as exc:
            raise self._error(exc, "delete archived objects") from None
        return done


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class S3Object:
    """One object of a zone exactly as listed, read in place (landing/files.py ObjectBytes): each read is a
    ranged GET pinned to the listed version (a versioned bucket) or ETag (`IfMatch`), so a check never reads
    another object than the listed one (an object rewritten since: RAT-S3-004)."""

    def __init__(self, zone: S3Zone, entry: ZoneEntry):
        self.zone = zone
        self.entry = entry
        self.key = zone.prefix + entry.name

    @property
    def size(self) -> int:
        return self.entry.size

    @property
    def uri(self) -> str:
        return self.zone.uri(self.entry.name)

    @property
    def identity(self) -> tuple:
        return (self.uri, self.entry.size, self.entry.mtime_ns, self.entry.etag, self.entry.version)

    def _get(self, **extra: Any) -> Any:
        args: dict[str, Any] = {"Bucket": self.zone.bucket, "Key": self.key, **extra}
        if self.entry.version:
            args["VersionId"] = self.entry.version
        elif self.entry.etag:
            args["IfMatch"] = f'"{self.entry.etag}"'
        try:
            return self.zone.client.get_object(**args)["Body"]
        except Exception as exc:
            raise self.zone._error(exc, "read an object", self.key) from None

    def read(self, start: int, length: int) -> bytes:
        end = min(self.entry.size, start + length)
        if end <= start:
            return b""
        body = self._get(Range=f"bytes={start}-{end - 1}")
        try:
            return body.read()
        except Exception as exc:
            raise self.zone._error(exc, "read an object", self.key) from None
        finally:
            body.close()

    def lines(self) -> Iterator[bytes]:
        body = self._get()
        try:
            yield from body.iter_lines(chunk_size=CHUNK, keepends=True)
        except Exception as exc:
            raise self.zone._error(exc, "read an object", self.key) from None
        finally:
            body.close()


_zones: dict[Any, S3Zone] = {}  # one per zone setting and way of reading
_zones_lock = threading.Lock()


def s3_zone(zone, in_place: bool = False) -> S3Zone:
    """The process's S3Zone for a settings.RemoteZone (one client per zone setting, reused across runs).
    `in_place`: Spark reads its objects from the bucket (spark/s3a.py reads_in_place)."""
    with _zones_lock:
        found = _zones.get((zone, in_place))
        if found is None:
            found = _zones[(zone, in_place)] = S3Zone.of(zone, in_place)
        return found
