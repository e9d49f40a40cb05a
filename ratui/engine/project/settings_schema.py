"""The shape of ratui.yaml, declared once: its sections, their keys, each key's type, default and allowed values.

settings.py reads the file with this schema and flattens the result into `Settings`, the object the rest of
ratui uses. A section here is a `Section` (schema.py): any key it does not declare is refused with the nearest
one it does. A type refuses a value in ratui's words (RAT-CFG-007, at the key's line).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, model_validator

from ratui.engine.project import catalog_specs, isolation_levels
from ratui.engine.project.alert_terms import AlertsSection
from ratui.engine.project.schedule_terms import CATCH_UP, DEFAULT_CATCH_UP, check_cron, check_timezone
from ratui.engine.project.schema import Section, at_least, invalid, mapping, one_of

# spark.jit: how ratui's own JVM compiles Spark's code. full: both of Java's compilers (fastest once warm); quick:
# only the quick one (a new JVM's start and first queries take about half the CPU, big work runs up to 2.7x slower);
# auto: quick for a `ratui run` whose inputs are small (spark/jit.py), full for everything else.
JIT_MODES = ("auto", "quick", "full")
# landing.bad_rows: a malformed CSV row or JSON line fails the run (naming file and line), or is left out and
# counted; landing.columns: files of a zone must have the same columns (any order), or are united by name.
BAD_ROWS = ("fail", "skip")
COLUMN_MODES = ("strict", "union")
# landing.s3_read: how Spark reads an S3 zone's objects. in_place: straight from the bucket (Spark's S3A connector);
# staged: downloaded to the run's staging folder first (works with pyspark alone, but only with a local Spark);
# auto: in place when Spark is not local (a cluster or a Connect server cannot read this machine's disk), else staged.
S3_READS = ("auto", "in_place", "staged")

# engine.max_memory_mb: below this a warm engine (Python, PySpark and a JVM) would renew itself on every command
MIN_ENGINE_MEMORY_MB = 512
ENGINE_BOUND_HINT = ("engine.max_memory_mb is the warm engine's memory (its process and Spark's JVM, in MiB, at "
                     f"least {MIN_ENGINE_MEMORY_MB}) and engine.max_commands the commands it serves (at least 1), "
                     "before it renews itself. Leave them out for the defaults (3072 MiB, 500 commands).")

Count = Annotated[int, PlainValidator(at_least(0))]
Positive = Annotated[int, PlainValidator(at_least(1))]


def _text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise invalid(f"{{where}} must be text, got {value!r}")
    return value


def _spark_config(value: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, setting in mapping(value).items():
        if not str(key).startswith("spark."):
            raise invalid(f"Spark setting '{key}' must start with 'spark.'", at=str(key))
        out[str(key)] = str(setting).lower() if isinstance(setting, bool) else str(setting)
    return out


def _connect_url(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text.startswith("sc://") or len(text) <= 5:
        shown = text.split(";", 1)[0] + (";..." if ";" in text else "")  # never a token in a message
        raise invalid(f"{{where}} must be a Spark Connect URL sc://HOST:PORT, got {shown!r}",
                      hint="Spark Connect servers listen on sc://HOST:15002 by default.")
    return text


def _folders(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise invalid("{where} must be a list of folder paths")
    return tuple(v.strip() for v in value)


Text = Annotated[str | None, PlainValidator(_text)]
Mapping = BeforeValidator(mapping)


class SparkSection(Section):
    # master: local[N] | spark://HOST:PORT (a standalone cluster); remote: sc://HOST:PORT (Spark Connect: no JVM in
    # ratui's process). SPARK_REMOTE in the environment sets the remote when ratui.yaml names neither.
    master: Annotated[str | None, PlainValidator(lambda v: None if v is None else str(v))] = None
    remote: Annotated[str | None, PlainValidator(_connect_url)] = None
    config: Annotated[dict[str, str], PlainValidator(_spark_config)] = {}
    jit: Annotated[str, PlainValidator(one_of(JIT_MODES))] = "auto"
    # Spark Connect only: how long a call keeps retrying a server that stopped answering (restarted, gone) before
    # the run fails, in seconds (the client's own default is ten minutes)
    connect_retry_seconds: Positive = 44

    @model_validator(mode="after")
    def _one_spark(self) -> SparkSection:
        if self.master is not None and self.remote is not None:
            raise invalid("'spark.master' and 'spark.remote' are both set", at="remote", hint=(
                "Keep spark.master for a local or standalone Spark, or spark.remote for Spark Connect."))
        return self


class RunSection(Section):
    threads: Positive = 1  # how many independent pipelines of one invocation run at once (each in its FAIR pool)


class QualitySection(Section):
    sample_rows: Count = 5


class DiffSection(Section):
    # a run's data diff (run/data_diff.py) is one Spark job when both sides of its table hold at most this many rows
    # (the snapshot summary's count); above it, it is read from the data files' statistics with no job (0: always)
    max_rows: Count = 1_000_000
    # at most this many rows on both sides together (and only plain columns): computed in ratui's process from
    # PyIceberg reads, no Spark job (0: never)
    in_process_rows: Count = 200_000


class MergeSection(Section):
    retries: Positive = 3
    backoff_ms: Count = 200


class S3Options(Section):
    """How to reach object storage: landing.s3 (every zone's defaults), one zone's own, or catalog.s3 (the
    warehouse's). Keys are best left to boto3's chain (the environment, a profile): ratui.yaml is often shared."""

    endpoint_url: Text = None
    region: Text = None
    profile: Text = None
    concurrency: Positive = 8
    path_style: bool | None = None  # None: path-style addressing for a custom endpoint_url, virtual hosts on AWS
    access_key_id: Annotated[str | None, PlainValidator(_text), Field(repr=False)] = None
    secret_access_key: Annotated[str | None, PlainValidator(_text), Field(repr=False)] = None

    @model_validator(mode="after")
    def _both_keys(self) -> S3Options:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            given = "access_key_id" if self.access_key_id is not None else "secret_access_key"
            raise invalid("{where} needs its pair (access_key_id and secret_access_key)", at=given,
                          hint="Give both, or neither and let boto3's chain find them (AWS_ACCESS_KEY_ID and "
                               "AWS_SECRET_ACCESS_KEY in the environment, or a profile).")
        return self


class Zone(S3Options):
    """A zone of landing.zones: its s3://bucket/prefix URL alone, or a mapping of url and S3 options."""

    url: Any = None

    @model_validator(mode="before")
    @classmethod
    def _bare_url(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else {"url": value}

    @model_validator(mode="after")
    def _s3_url(self) -> Zone:
        self.bucket_and_prefix()
        return self

    def bucket_and_prefix(self) -> tuple[str, str]:
        """("bucket", "" or "prefix/")."""
        text = self.url.strip() if isinstance(self.url, str) else ""
        if not text.startswith("s3://") or len(text) <= 5 or text[5] == "/":
            raise invalid(f"{{where}} must be an s3://bucket/prefix URL, got {self.url!r}",
                          hint="Write the zone as s3://BUCKET/PREFIX (the prefix may be empty).")
        bucket, _, prefix = text[5:].partition("/")
        prefix = prefix.strip("/")
        return bucket, prefix + "/" if prefix else ""


class LandingSection(Section):
    max_attempts: Positive = 3
    bad_rows: Annotated[str, PlainValidator(one_of(BAD_ROWS))] = "fail"
    columns: Annotated[str, PlainValidator(one_of(COLUMN_MODES))] = "strict"
    # zones that live in object storage, {zone | namespace.zone: s3://bucket/prefix or a Zone mapping}
    zones: Annotated[dict[Any, Zone], Mapping] = {}
    s3: S3Options = Field(default_factory=S3Options)
    s3_read: Annotated[str, PlainValidator(one_of(S3_READS))] = "auto"


class PythonSection(Section):
    """How Python pipelines run: in ratui's own process (none), or in a child process (process), confined by the
    kernel (confined: Landlock and seccomp), or that inside bubblewrap's namespaces (jail). The child's limits:
    wall-clock seconds, CPU seconds, memory, the size of a file it writes, open files."""

    # how a Python pipeline's run(ctx) is kept from the machine (project/isolation_levels.py); a pipeline's own
    # `isolation` annotation or config.yaml key overrides it
    isolation: Annotated[str, PlainValidator(one_of(isolation_levels.NAMES))] = isolation_levels.DEFAULT
    isolation_required: bool = False  # a level the machine cannot give is an error before the run, not a degrade
    timeout: Positive = 3600
    cpu_seconds: Positive = 3600
    memory_mb: Annotated[int, PlainValidator(at_least(256))] = 4096
    file_mb: Positive = 1024
    open_files: Annotated[int, PlainValidator(at_least(64))] = 1024


class WatchSection(Section):
    debounce_ms: Count = 300
    poll_seconds: Positive = 30  # how often watch mode lists object-store zones (a local folder is watched)


class EngineSection(Section):
    """The warm engine (`ratui engine`): a process per project that keeps Spark, the catalog and the compiled
    project between commands. `warm: false` runs every command in a process of its own, as `--no-warm` does once;
    `idle_minutes`: how long it waits for a command before it stops. It renews itself (retires once the commands
    in flight end; the next command starts a fresh one) when its process and its JVM use more than `max_memory_mb`
    of memory (RSS), or when it has served `max_commands` commands: its memory stays bounded over days."""

    warm: bool = True
    idle_minutes: Positive = 15
    max_memory_mb: Annotated[int, PlainValidator(at_least(MIN_ENGINE_MEMORY_MB, code="RAT-ENG-005",
                                                          hint=ENGINE_BOUND_HINT))] = 3072
    max_commands: Annotated[int, PlainValidator(at_least(1, code="RAT-ENG-005", hint=ENGINE_BOUND_HINT))] = 500


class ReaperSection(Section):
    """A swept file must be an hour old at least: a younger one may belong to a write not committed yet."""

    stuck_run_timeout_minutes: Positive = 30
    orphan_branch_max_age_hours: Count = 6
    processed_max_age_days: Count = 7
    snapshot_max_age_days: Count = 7
    compact_deleted_percent: Positive = 10
    orphan_file_max_age_hours: Positive = 24
    run_history_keep_per_pipeline: Count = 1000
    run_history_max_age_days: Count = 90
    interval_minutes: Positive = 60


class PathsSection(Section):
    # real folders outside the root that ratui may read (relative ones: to the project root)
    allow_outside: Annotated[tuple[str, ...], PlainValidator(_folders)] = ()


class CatalogSection(Section):
    """Which branch catalog the project uses (project/catalog_specs.py's types): the embedded one in .ratui/ (sqlite,
    the default) or a Nessie server (`uri`: its REST API v2, `token`: a bearer token, never printed). `warehouse`:
    where the tables are, an s3://bucket/prefix (either catalog; `s3` says how to reach it) or, for Nessie, a folder
    every installation reaches. state/catalog/config.py opens it."""

    type: Annotated[str, PlainValidator(one_of(catalog_specs.NAMES))] = catalog_specs.DEFAULT
    uri: Any = None  # checked with the type below (text, http or https, only for nessie)
    token: Annotated[str | None, PlainValidator(_text), Field(repr=False)] = None
    warehouse: Text = None
    s3: S3Options = Field(default_factory=S3Options)

    @model_validator(mode="after")
    def _uri_for_nessie(self) -> CatalogSection:
        hint = "catalog.uri is Nessie's REST API v2 URL, e.g. http://HOST:19120/api/v2."
        if self.uri is not None and not isinstance(self.uri, str):
            raise invalid(f"{{where}} must be text (a URL), got {type(self.uri).__name__}", at="uri", hint=hint)
        on_store = self.warehouse is not None and "://" in self.warehouse
        spec = catalog_specs.BY_NAME[self.type]
        misplaced = [key for key, wrong in (
            ("uri", not spec.server and self.uri is not None), ("token", not spec.server and self.token is not None),
            ("warehouse", not spec.folder_warehouse and self.warehouse is not None and not on_store)) if wrong]
        if misplaced:
            at = misplaced[0]
            if at == "warehouse":
                raise invalid("{where} belongs to " + catalog_specs.types_named(catalog_specs.FOLDER_WAREHOUSES)
                              + " (the embedded catalog keeps a folder warehouse in the project; an s3:// one works "
                              "with both)", at=at, hint=_CATALOG_TYPE_HINT)
            raise invalid("{where} belongs to " + catalog_specs.types_named(catalog_specs.SERVERS), at=at,
                          hint=_CATALOG_TYPE_HINT)
        if on_store:
            _object_store_url(self.warehouse or "")
        elif "s3" in self.model_fields_set:
            raise invalid("{where} says how to reach an s3:// warehouse, and catalog.warehouse is not one", at="s3",
                          hint="Set catalog.warehouse: s3://BUCKET/PREFIX, or remove catalog.s3.")
        if spec.server and not (self.uri or "").startswith(("http://", "https://")):
            # the scheme only, never the rest: a URL may hold a password
            scheme = (self.uri or "").partition("://")[0][:12] if "://" in (self.uri or "") else ""
            raise invalid("'catalog.uri' is missing" if self.uri is None else "{where} must be an http:// or https:// "
                          f"URL{', not ' + scheme + '://...' if scheme else ''}",
                          at="uri" if self.uri is not None else None, hint=hint)
        return self


_CATALOG_TYPE_HINT = "Add `type: nessie` to use a Nessie server, or remove it for the embedded catalog."


def _object_store_url(url: str) -> None:
    """catalog.warehouse on an object store: s3://bucket[/prefix], the only scheme ratui has a connector for."""
    scheme, _, rest = url.strip().partition("://")
    if scheme != "s3":
        raise invalid(f"{{where}}: ratui has no connector for {scheme[:12]}:// warehouses", at="warehouse",
                      hint="Use s3://BUCKET/PREFIX (any S3-compatible store: AWS, MinIO, Ceph...), or a folder.")
    bucket = rest.partition("/")[0]
    if not bucket or not all(c.isalnum() or c in ".-" for c in bucket) or "@" in rest or "?" in rest:
        raise invalid("{where} must be s3://BUCKET/PREFIX (a bucket name of letters, digits, '.' and '-')",
                      at="warehouse", hint="For example s3://lake/analytics.")


_SCHEDULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _schedule_name(value: Any) -> str:
    if not isinstance(value, str) or not _SCHEDULE_NAME.match(value.strip()):
        raise invalid(f"{{where}} must be a name of letters, digits, '_', '.' and '-', got {value!r}",
                      hint="For example `name: nightly`.")
    return value.strip()


def _selector(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{{where}} must be a `ratui run` selector (text), got {value!r}", "RAT-SCH-004")
    return value.strip()


class ScheduleEntry(Section):
    """One of ratui.yaml's schedules: `select` run by `cron` in `timezone` (schedules.md)."""

    name: Annotated[str, PlainValidator(_schedule_name)]
    select: Annotated[str, PlainValidator(_selector)]
    cron: Annotated[str, PlainValidator(check_cron)]
    timezone: Annotated[str, PlainValidator(check_timezone)] = "UTC"
    atomic: bool = False  # the selected runs land on main in one commit, or none does
    catch_up: Annotated[str, PlainValidator(one_of(CATCH_UP))] = DEFAULT_CATCH_UP
    enabled: bool = True


def _schedules(value: Any) -> tuple[ScheduleEntry, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid(f"{{where}} must be a list of schedules, got {type(value).__name__}",
                      hint='For example: schedules: [{name: nightly, select: "gold.revenue+", cron: "0 6 * * *"}]')
    return tuple(value)


def _unique_names(entries: tuple[ScheduleEntry, ...]) -> tuple[ScheduleEntry, ...]:
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.name in seen:
            raise invalid(f"schedule name '{entry.name}' is used twice", "RAT-SCH-003", at=str(index))
        seen.add(entry.name)
    return entries


class RunnerSection(Section):
    """`ratui up`, the long-running runner (schedules.md): the lease that keeps a second runner from firing
    (seconds; renewed every loop, taken over once expired), the grace a SIGTERM gives the runs in flight before they
    are cancelled, how often it wakes, and the port of its /healthz on 127.0.0.1 (0: none)."""

    lease_seconds: Annotated[int, PlainValidator(at_least(2))] = 60
    grace_seconds: Count = 30
    loop_seconds: Positive = 5
    health_port: Annotated[int, PlainValidator(at_least(0))] = 8788


class SettingsFile(Section):
    """ratui.yaml as a whole."""

    namespace: Any = None  # a name (names.py); None: the project's only namespace folder
    spark: SparkSection = Field(default_factory=SparkSection)
    run: RunSection = Field(default_factory=RunSection)
    quality: QualitySection = Field(default_factory=QualitySection)
    diff: DiffSection = Field(default_factory=DiffSection)
    merge: MergeSection = Field(default_factory=MergeSection)
    watch: WatchSection = Field(default_factory=WatchSection)
    engine: EngineSection = Field(default_factory=EngineSection)
    landing: LandingSection = Field(default_factory=LandingSection)
    reaper: ReaperSection = Field(default_factory=ReaperSection)
    paths: PathsSection = Field(default_factory=PathsSection)
    catalog: CatalogSection = Field(default_factory=CatalogSection)
    python: PythonSection = Field(default_factory=PythonSection)
    runner: RunnerSection = Field(default_factory=RunnerSection)
    schedules: Annotated[tuple[ScheduleEntry, ...], BeforeValidator(_schedules), AfterValidator(_unique_names)] = ()
    alerts: AlertsSection = Field(default_factory=AlertsSection)

    # sections whose keys are Settings attributes as they are: {section}_{key}
    FLAT: ClassVar[tuple[str, ...]] = ("run", "quality", "diff", "merge", "landing", "watch", "engine", "reaper",
                                       "python", "runner")

    def flat(self) -> dict[str, Any]:
        return {f"{name}_{key}": value for name in self.FLAT for key, value in getattr(self, name)
                if not isinstance(value, (dict, Section))}
