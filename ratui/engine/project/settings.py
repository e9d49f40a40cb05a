"""Project settings from `ratui.yaml` at the project root, validated and typed.

settings_schema.py declares the file's shape; here it is read, checked against it (every problem a coded error
at the offending key's line) and flattened into `Settings`, the one object the rest of ratui reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ratui.engine.errors import RatuiError
from ratui.engine.project import isolation_levels
from ratui.engine.project.alert_terms import NO_ALERTS, Alerts, checked_alerts
from ratui.engine.project.names import check_name
from ratui.engine.project.schema import coded_error, read_yaml
from ratui.engine.project.settings_schema import LandingSection, ReaperSection, S3Options, SettingsFile

SETTINGS_FILE = "ratui.yaml"
STATE_DIR = ".ratui"
DB_FILE = "ratui.db"

# Spark settings ratui applies unless ratui.yaml overrides them. Small data wants few shuffle
# partitions; timestamps must be written as INT64 micros for Iceberg; field ids make schema evolution read right.
DEFAULT_SPARK_CONFIG: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
}

# every reaper setting with its default (the schema's ReaperSection declares them, with their minimums)
REAPER_KEYS: dict[str, int] = {key: spec.default for key, spec in ReaperSection.model_fields.items()}


@dataclass(frozen=True)
class Settings:
    root: Path
    namespace: str
    spark_master: str = "local[*]"
    spark_remote: str | None = None
    # SPARK_REMOTE from the environment when ratui.yaml names spark.master or spark.remote itself: ignored (the
    # file wins), kept here without its parameters so that the CLI and the console can say so
    spark_remote_ignored: str | None = None
    spark_config: dict[str, str] = field(default_factory=dict)
    spark_jit: str = "auto"
    spark_connect_retry_seconds: int = 44
    quality_sample_rows: int = 5
    diff_max_rows: int = 1_000_000
    diff_in_process_rows: int = 200_000
    run_threads: int = 1
    merge_retries: int = 3
    merge_backoff_ms: int = 200
    landing_max_attempts: int = 3
    landing_bad_rows: str = "fail"
    landing_columns: str = "strict"
    landing_s3_read: str = "auto"
    # real folders outside the root that ratui may read (landing zones, pipelines linked in from elsewhere)
    allow_outside: tuple[Path, ...] = ()
    watch_debounce_ms: int = 300
    python_isolation: str = isolation_levels.DEFAULT
    python_isolation_required: bool = False
    python_timeout: int = 3600
    python_cpu_seconds: int = 3600
    python_memory_mb: int = 4096
    python_file_mb: int = 1024
    python_open_files: int = 1024
    watch_poll_seconds: int = 30
    engine_warm: bool = True  # commands run in the project's warm engine (ratui/warm/)
    engine_idle_minutes: int = 15
    engine_max_memory_mb: int = 3072  # the warm engine renews itself past this RSS (its process and its JVM)
    engine_max_commands: int = 500  # ... or after this many commands
    # ratui.yaml's catalog section as written (type, uri, token): state/catalog/config.py checks and opens it
    catalog: dict[str, Any] = field(default_factory=dict, repr=False)
    # object-store landing zones: (namespace, zone) -> RemoteZone (see remote_zone())
    remote_zones: dict[tuple[str, str], "RemoteZone"] = field(default_factory=dict)
    reaper_stuck_run_timeout_minutes: int = 30
    reaper_orphan_branch_max_age_hours: int = 6
    reaper_processed_max_age_days: int = 7
    reaper_snapshot_max_age_days: int = 7
    reaper_compact_deleted_percent: int = 10
    reaper_orphan_file_max_age_hours: int = 24
    reaper_run_history_keep_per_pipeline: int = 1000
    reaper_run_history_max_age_days: int = 90
    reaper_interval_minutes: int = 60
    runner_lease_seconds: int = 60  # ratui up (runner/): the lease a second runner waits for
    runner_grace_seconds: int = 30
    runner_loop_seconds: int = 5
    runner_health_port: int = 8788
    # ratui.yaml's schedules, each with its line (ops/schedules.py adds the pipelines' own)
    schedules: tuple["DeclaredSchedule", ...] = ()
    # ratui.yaml's alerts: channels and rules (engine/alerts/ sends them)
    alerts: Alerts = NO_ALERTS

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def db_path(self) -> Path:
        return self.state_dir / DB_FILE

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def spark_where(self) -> str:
        """Where Spark runs, in a user's words: local, a master URL, or a Connect endpoint."""
        if self.spark_remote:  # without its parameters: a token never reaches the screen
            return f"Spark Connect {self.spark_remote.split('/;', 1)[0]}"
        if self.spark_master.startswith("spark://"):
            return f"cluster {self.spark_master}"
        return self.spark_master

    @property
    def spark_is_local(self) -> bool:
        """Whether Spark runs in ratui's own JVM on this machine (local[N]): everything else (a cluster's executors,
        a Connect server) may not see this machine's disk."""
        return not self.spark_remote and self.spark_master.startswith("local")

    @property
    def zones_read_in_place(self) -> bool:
        """Whether Spark reads object-store landing zones straight from their bucket (landing.s3_read: auto ->
        when Spark is not local; in_place / staged as set). Staged needs no connector in Spark (pyspark alone has
        none), but only a Spark that sees this disk can read what was downloaded to it."""
        if self.landing_s3_read == "auto":
            return bool(self.remote_zones) and not self.spark_is_local
        return self.landing_s3_read == "in_place" and bool(self.remote_zones)

    def remote_zone(self, namespace: str, zone: str) -> "RemoteZone | None":
        return self.remote_zones.get((namespace, zone))

    def object_warehouse(self):
        """The s3:// warehouse of catalog.warehouse (storage/warehouse.py), or None when the tables are in a folder."""
        from ratui.engine.storage.warehouse import object_warehouse

        return object_warehouse(self.catalog, self.root)

    def locations(self):
        """The project's path rules (root, allowed folders outside it): see locations.py."""
        from ratui.engine.locations import ProjectLocations

        return ProjectLocations(self.root, (), self.allow_outside)


@dataclass(frozen=True)
class RemoteZone:
    """A landing zone in S3-compatible storage: s3://bucket/prefix/ and how to reach it."""
    namespace: str
    name: str
    bucket: str
    prefix: str  # "" or ending in "/"
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    concurrency: int = 8
    path_style: bool | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def access(self):
        """How to reach the zone's bucket (storage/s3.py S3Access)."""
        from ratui.engine.storage.s3 import S3Access

        return S3Access(self.bucket, self.endpoint_url, self.region, self.profile, self.path_style,
                        self.access_key_id, self.secret_access_key)


@dataclass(frozen=True)
class DeclaredSchedule:
    """One entry of ratui.yaml's schedules: checked (cron, time zone, unique name), and where it was written."""
    name: str
    select: str
    cron: str
    timezone: str
    atomic: bool
    catch_up: str
    enabled: bool
    file: str
    line: int | None


def _remote_zones(landing: LandingSection, namespace: str, path: Path) -> dict[tuple[str, str], RemoteZone]:
    """landing.zones with landing.s3's options under each zone's own."""
    out: dict[tuple[str, str], RemoteZone] = {}
    for key, zone in landing.zones.items():
        ns, _, name = str(key).rpartition(".")
        ns = ns or namespace
        check_name(ns, "namespace", str(path))
        check_name(name, "landing zone", str(path))
        options = {option: getattr(zone if option in zone.model_fields_set else landing.s3, option)
                   for option in S3Options.model_fields}
        out[(ns, name)] = RemoteZone(ns, name, *zone.bucket_and_prefix(), **options)
    return out


def _spark_remote_from_environment(data: Any) -> tuple[Any, str | None]:
    """SPARK_REMOTE as spark.remote when ratui.yaml names neither a master nor a remote (checked as if the file said
    it). When the file names one, it wins: the variable is ignored, returned without its parameters (a token)."""
    environment = os.environ.get("SPARK_REMOTE")
    data = {} if data is None else data
    spark = data.get("spark") if isinstance(data, dict) else []
    if not environment or not isinstance(spark, (dict, type(None))):  # not a mapping: the schema says so
        return data, None
    if spark and (spark.get("master") is not None or spark.get("remote") is not None):
        return data, environment.split("/;", 1)[0]
    return {**data, "spark": {**(spark or {}), "remote": environment}}, None


def find_project_root(start: Path) -> Path:
    """The folder holding ratui.yaml: `start` itself or one of its parents."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / SETTINGS_FILE).is_file():
            return folder
    raise RatuiError("RAT-PRJ-005", f"no {SETTINGS_FILE} in {start} or any parent folder", file=str(start))


def load_settings(root: Path) -> Settings:
    root = root.resolve()
    path = root / SETTINGS_FILE
    if not path.is_file():
        raise RatuiError("RAT-PRJ-005", f"no {SETTINGS_FILE} in {root}", file=str(root))
    doc = read_yaml(path, "RAT-CFG-007")
    data, remote_ignored = _spark_remote_from_environment(doc.data)
    try:
        file = SettingsFile.model_validate(data)
    except ValidationError as exc:
        raise coded_error(exc, "RAT-CFG-007", lambda loc: (str(path), doc.line(loc)), SETTINGS_FILE) from None

    namespace = file.namespace
    if namespace is None:
        # A project with exactly one namespace folder needs no setting.
        candidates = sorted(p.name for p in root.iterdir() if (p / "pipelines").is_dir())
        if len(candidates) != 1:
            raise RatuiError("RAT-CFG-007", "'namespace' is not set and the project has "
                             f"{len(candidates)} namespace folders", file=str(path),
                             hint="Add `namespace: NAME` to ratui.yaml: the namespace ref('layer.name') means.")
        namespace = candidates[0]
    namespace = str(namespace)
    check_name(namespace, "namespace", str(path))
    return Settings(
        root=root,
        namespace=namespace,
        spark_master=file.spark.master or "local[*]",
        spark_remote=file.spark.remote,
        spark_remote_ignored=remote_ignored,
        spark_config={**DEFAULT_SPARK_CONFIG, **file.spark.config},
        spark_jit=file.spark.jit,
        spark_connect_retry_seconds=file.spark.connect_retry_seconds,
        # relative entries are relative to the project root; realpath so a symlinked entry means its target
        allow_outside=tuple(Path(os.path.realpath(root / os.path.expanduser(folder)))
                            for folder in file.paths.allow_outside),
        remote_zones=_remote_zones(file.landing, namespace, path),
        catalog=file.catalog.model_dump(exclude_defaults=True),
        schedules=tuple(DeclaredSchedule(**entry.model_dump(), file=str(path), line=doc.line(("schedules", str(i))))
                        for i, entry in enumerate(file.schedules)),
        alerts=checked_alerts(file.alerts, str(path), doc.line),
        **file.flat(),
    )
