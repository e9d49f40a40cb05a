"""How to reach one S3-compatible bucket, said once for every part that talks to it.

An `S3Access` (a bucket, its endpoint, region, addressing style and credentials) gives each client what it needs:

    boto3           client()               listing, fetching and archiving landing objects; the reaper's sweep of a
                                           warehouse's objects (ops/orphans.py ObjectStore)
    PyIceberg       file_io_properties()   its PyArrowFileIO's s3.* properties (metadata, manifests, data files)
    Spark (S3A)     spark_conf()           fs.s3a.bucket.{bucket}.* settings of the run's session

Credentials: `access_key_id` / `secret_access_key` given in ratui.yaml (best left out: the file is often shared),
else boto3's standard chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE or `profile:`, the shared
credentials file, an instance or container role), resolved once in this process. Spark gets them per bucket in the
session's settings, because an executor or a Spark Connect server does not share this process's environment (Spark
redacts settings named like keys and secrets from its UI and logs). They are never part of a message, a repr, a
table property or a log line here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ratui.engine.errors import RatuiError

CONNECT_TIMEOUT = 3  # seconds: a dead endpoint fails in seconds, not minutes
READ_TIMEOUT = 30
RETRIES = 2


@dataclass(frozen=True)
class Credentials:
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


def split_url(url: str) -> tuple[str, str]:
    """'s3://bucket/some/prefix/' -> ('bucket', 'some/prefix') (no slashes at either end of the prefix)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


@dataclass(frozen=True)
class S3Access:
    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    path_style: bool | None = None  # None: path-style for a custom endpoint (MinIO, moto...), virtual hosts on AWS
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False, compare=False, hash=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False, hash=False)

    @property
    def endpoint(self) -> str:
        """What a message names: the endpoint (never with a user or password), or AWS S3."""
        if not self.endpoint_url:
            return "AWS S3"
        scheme, _, rest = self.endpoint_url.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}" if rest else self.endpoint_url

    @property
    def path_style_access(self) -> bool:
        return bool(self.endpoint_url) if self.path_style is None else self.path_style

    @property
    def region_name(self) -> str:
        return self.region or self._session().region_name or "us-east-1"

    # ------------------------------------------------------------------------------------------ credentials

    def _session(self):
        with self._lock:
            session = self._cache.get("session")
            if session is None:
                import boto3

                try:
                    session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
                except Exception as exc:  # botocore.exceptions.ProfileNotFound and kin
                    raise RatuiError("RAT-S3-002", f"cannot use AWS profile {self.profile!r} for bucket "
                                     f"'{self.bucket}': {type(exc).__name__}", file=f"s3://{self.bucket}") from None
                self._cache["session"] = session
            return session

    def credentials(self) -> Credentials | None:
        """The key ratui signs with: ratui.yaml's, else boto3's chain (None: none found, anonymous)."""
        if self.access_key_id and self.secret_access_key:
            return Credentials(self.access_key_id, self.secret_access_key)
        with self._lock:
            if "credentials" in self._cache:
                return self._cache["credentials"]
        found = self._session().get_credentials()
        frozen = found.get_frozen_credentials() if found is not None else None
        creds = Credentials(frozen.access_key, frozen.secret_key, frozen.token or None) if frozen else None
        with self._lock:
            self._cache["credentials"] = creds
        return creds

    # ------------------------------------------------------------------------------------------ clients

    def client(self, pool: int = 10):
        """A boto3 S3 client with bounded timeouts and retries."""
        from botocore.config import Config

        config = Config(connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                        retries={"max_attempts": RETRIES + 1, "mode": "standard"}, max_pool_connections=pool,
                        s3={"addressing_style": "path" if self.path_style_access else "auto"})
        creds = self.credentials() if (self.access_key_id and self.secret_access_key) else None
        keys = {} if creds is None else {"aws_access_key_id": creds.access_key_id,
                                         "aws_secret_access_key": creds.secret_access_key}
        return self._session().client("s3", endpoint_url=self.endpoint_url, config=config,
                                      region_name=self.region_name, **keys)

    def file_io_properties(self) -> dict[str, str]:
        """PyIceberg's PyArrowFileIO settings for this bucket (its S3 file system)."""
        props = {"s3.region": self.region_name, "s3.connect-timeout": str(float(CONNECT_TIMEOUT)),
                 "s3.request-timeout": str(float(READ_TIMEOUT))}
        if self.endpoint_url:
            props["s3.endpoint"] = self.endpoint_url
        if not self.path_style_access and self.endpoint_url:
            props["s3.force-virtual-addressing"] = "true"
        creds = self.credentials()
        if creds is not None:
            props["s3.access-key-id"] = creds.access_key_id
            props["s3.secret-access-key"] = creds.secret_access_key
            if creds.session_token:
                props["s3.session-token"] = creds.session_token
        return props

    def spark_conf(self) -> dict[str, str]:
        """Spark's S3A settings for this bucket alone (per-bucket keys: a landing bucket and the warehouse's may
        differ in endpoint or key), set on a run's session."""
        base = f"fs.s3a.bucket.{self.bucket}."
        conf = {base + "path.style.access": str(self.path_style_access).lower(),
                base + "endpoint.region": self.region_name,
                base + "connection.establish.timeout": f"{CONNECT_TIMEOUT}s",
                base + "attempts.maximum": str(RETRIES + 1),
                base + "retry.limit": str(RETRIES + 1),
                # an object replaced while Spark reads it fails the read instead of mixing two versions
                base + "change.detection.mode": "server",
                base + "change.detection.source": "etag"}
        if self.endpoint_url:
            conf[base + "endpoint"] = self.endpoint_url
            conf[base + "connection.ssl.enabled"] = str(self.endpoint_url.startswith("https:")).lower()
        creds = self.credentials()
        if creds is not None:
            conf[base + "access.key"] = creds.access_key_id
            conf[base + "secret.key"] = creds.secret_access_key
            if creds.session_token:
                conf[base + "session.token"] = creds.session_token
                conf[base + "aws.credentials.provider"] = \
                    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            else:
                conf[base + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return conf

    # ------------------------------------------------------------------------------------------ errors

    def error(self, exc: BaseException, what: str, where: str | None = None) -> RatuiError:
        """A boto3 / botocore / pyarrow failure as a coded error (RAT-S3-001..004) naming the bucket or object."""
        return classify(exc, what, where or f"s3://{self.bucket}", self.bucket, self.endpoint)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def classify(exc: BaseException, what: str, where: str, bucket: str, endpoint: str) -> RatuiError:
    """An object-store failure of any client (boto3, pyarrow, Spark's S3A as text) as RAT-S3-00x."""
    if isinstance(exc, RatuiError):
        return exc
    text = f"{type(exc).__name__}: {exc}"
    try:
        from botocore import exceptions as bex
    except ImportError:  # pragma: no cover - boto3 is a dependency
        bex = None
    if bex is not None and isinstance(exc, bex.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if getattr(exc, "operation_name", "") == "HeadBucket" and (status == 404 or code in ("404", "NoSuchBucket")):
            code = "NoSuchBucket"  # HEAD has no body: a bucket that is not there is a bare 404
        text = f"{code} {status}"
    elif bex is not None and isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError)):
        return RatuiError("RAT-S3-002", f"no AWS credentials to {what}", file=where)
    lowered = text.lower()
    if any(s in lowered for s in ("nosuchbucket", "no_such_bucket", "bucket does not exist", "unknownstoreexception")):
        return RatuiError("RAT-S3-003", f"bucket '{bucket}' does not exist at {endpoint} ({what})", file=where)
    if any(s in lowered for s in ("invalidaccesskeyid", "signaturedoesnotmatch", "accessdenied", "expiredtoken",
                                  "invalidtoken", "403", "forbidden", "access denied", "access_denied", "nocredentials",
                                  "no aws credentials")):
        return RatuiError("RAT-S3-002", f"{endpoint} refused the credentials to {what}", file=where)
    if any(s in lowered for s in ("precondition", "412", "nosuchkey", "nosuchversion", "remotefilechanged",
                                  "changed on s3", "filenotfoundexception", "no such file or directory",
                                  "file_not_exist")):  # the last three: S3A's (Spark's) word for a vanished object
        return RatuiError("RAT-S3-004", f"{where} changed or vanished while ratui was reading it", file=where)
    if any(s in lowered for s in ("connect", "unknownhost", "unreachable", "timed out", "timeout", "refused",
                                  "curl error", "name or service not known", "endpoint", "network_connection")):
        return RatuiError("RAT-S3-001", f"cannot reach {endpoint} to {what}", file=where)
    return RatuiError("RAT-S3-001", f"{endpoint} failed to {what}: {first_line(exc)}", file=where)
