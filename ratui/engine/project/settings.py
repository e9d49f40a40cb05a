"""Project settings from `ratui.yaml` at the project root, validated and typed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project.names import check_name

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

TOP_KEYS = {"namespace", "spark", "run", "quality", "merge", "watch", "landing", "reaper", "paths"}
RUN_KEYS = {"threads"}
# run.threads: how many independent pipelines of one invocation run at once (each in its own FAIR pool).
SPARK_KEYS = {"master", "remote", "config", "jit"}
# spark.master: local[N] | spark://HOST:PORT (a standalone cluster); spark.remote: sc://HOST:PORT (Spark Connect:
# no JVM in ratui's process). SPARK_REMOTE in the environment sets the remote when ratui.yaml does not.
# spark.jit: how ratui's own JVM compiles Spark's code. full: both of Java's compilers (fastest once warm); quick:
# only the quick one (a new JVM's start and first queries take about half the CPU, big work runs up to 2.7x slower);
# auto: quick for a `ratui run` whose inputs are small (spark/jit.py), full for everything else.
JIT_MODES = ("auto", "quick", "full")
QUALITY_KEYS = {"sample_rows"}
MERGE_KEYS = {"retries", "backoff_ms"}
LANDING_KEYS = {"max_attempts", "bad_rows", "columns", "zones", "s3"}
# landing.zones: zones that live in object storage, {zone | namespace.zone: s3://bucket/prefix}, or a mapping
# {url: s3://..., endpoint_url: ...}; landing.s3: defaults for them (endpoint_url, region, profile, concurrency).
S3_KEYS = {"endpoint_url", "region", "profile", "concurrency"}
ZONE_KEYS = S3_KEYS | {"url"}
# landing.bad_rows: a malformed CSV row or JSON line fails the run (naming file and line), or is left out and
# counted; landing.columns: files of a zone must have the same columns (any order), or are united by name.
BAD_ROWS = ("fail", "skip")
COLUMN_MODES = ("strict", "union")
PATHS_KEYS = {"allow_outside"}
WATCH_KEYS = {"debounce_ms", "poll_seconds"}
# watch.poll_seconds: how often watch mode lists object-store zones (a local folder is watched, not polled)
# reaper setting -> (default, minimum). A swept file must be older than an hour at least: younger files may
# belong to a write that has not committed yet.
REAPER_KEYS: dict[str, tuple[int, int]] = {
    "stuck_run_timeout_minutes": (30, 1),
    "orphan_branch_max_age_hours": (6, 0),
    "processed_max_age_days": (7, 0),
    "snapshot_max_age_days": (7, 0),
    "compact_deleted_percent": (10, 1),
    "orphan_file_max_age_hours": (24, 1),
    "run_history_keep_per_pipeline": (1000, 0),
    "run_history_max_age_days": (90, 0),
    "interval_minutes": (60, 1),
}


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
    quality_sample_rows: int = 5
    run_threads: int = 1
    merge_retries: int = 3
    merge_backoff_ms: int = 200
    landing_max_attempts: int = 3
    landing_bad_rows: str = "fail"
    landing_columns: str = "strict"
    # real folders outside the root that ratui may read (landing zones, pipelines linked in from elsewhere)
    allow_outside: tuple[Path, ...] = ()
    watch_debounce_ms: int = 300
    watch_poll_seconds: int = 30
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

    def remote_zone(self, namespace: str, zone: str) -> "RemoteZone | None":
        return self.remote_zones.get((namespace, zone))

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

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def _s3_url(value: Any, name: str, path: Path) -> tuple[str, str]:
    text = str(value).strip() if isinstance(value, str) else ""
    if not text.startswith("s3://") or len(text) <= 5 or text[5] == "/":
        raise RatuiError("RAT-CFG-007", f"'{name}' must be an s3://bucket/prefix URL, got {value!r}", file=str(path),
                         hint="Write the zone as s3://BUCKET/PREFIX (the prefix may be empty).")
    bucket, _, prefix = text[5:].partition("/")
    prefix = prefix.strip("/")
    return bucket, prefix + "/" if prefix else ""


def _remote_zones(landing: dict[str, Any], namespace: str, path: Path) -> dict[tuple[str, str], RemoteZone]:
    defaults = _mapping(landing.get("s3"), "landing.s3", path)
    _check_keys(defaults, S3_KEYS, "landing.s3.", path)
    zones = _mapping(landing.get("zones"), "landing.zones", path)
    out: dict[tuple[str, str], RemoteZone] = {}
    for key, value in zones.items():
        where = f"landing.zones.{key}"
        ns, _, zone = str(key).rpartition(".")
        ns = ns or namespace
        check_name(ns, "namespace", str(path))
        check_name(zone, "landing zone", str(path))
        options = dict(defaults)
        if isinstance(value, dict):
            _check_keys(value, ZONE_KEYS, where + ".", path)
            options.update({k: v for k, v in value.items() if k != "url"})
            value = value.get("url")
        bucket, prefix = _s3_url(value, where, path)
        for option in ("endpoint_url", "region", "profile"):
            if options.get(option) is not None and not isinstance(options[option], str):
                raise RatuiError("RAT-CFG-007", f"'{where}.{option}' must be text, got {options[option]!r}",
                                 file=str(path))
        out[(ns, zone)] = RemoteZone(
            ns, zone, bucket, prefix, endpoint_url=options.get("endpoint_url"), region=options.get("region"),
            profile=options.get("profile"),
            concurrency=_int(options.get("concurrency", 8), f"{where}.concurrency", path, minimum=1))
    return out


def _mapping(value: Any, where: str, path: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RatuiError("RAT-CFG-007", f"'{where}' must be a mapping, got {type(value).__name__}", file=str(path))
    return value


def _check_keys(section: dict[str, Any], allowed: set[str], where: str, path: Path) -> None:
    for key in section:
        if key not in allowed:
            raise RatuiError(
                "RAT-CFG-007",
                f"unknown setting '{where}{key}'",
                file=str(path),
                hint=did_you_mean(str(key), allowed),
            )


def _int(value: Any, name: str, path: Path, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RatuiError("RAT-CFG-007", f"'{name}' must be an integer >= {minimum}, got {value!r}", file=str(path))
    return value


def _choice(value: Any, name: str, choices: tuple[str, ...], path: Path) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise RatuiError("RAT-CFG-007", f"'{name}' must be one of {', '.join(choices)}, got {value!r}", file=str(path),
                         hint=did_you_mean(text, choices))
    return text


def _folders(value: Any, name: str, root: Path, path: Path) -> tuple[Path, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RatuiError("RAT-CFG-007", f"'{name}' must be a list of folder paths", file=str(path))
    # relative entries are relative to the project root; realpath so a symlinked entry means its target
    return tuple(Path(os.path.realpath(root / os.path.expanduser(v.strip()))) for v in value)


def _remote_setting(spark: dict[str, Any], path: Path) -> Any:
    """spark.remote, or SPARK_REMOTE when ratui.yaml names neither a master nor a remote."""
    if spark.get("remote") is not None and spark.get("master") is not None:
        raise RatuiError("RAT-CFG-007", "'spark.master' and 'spark.remote' are both set", file=str(path),
                         hint="Keep spark.master for a local or standalone Spark, or spark.remote for Spark Connect.")
    if spark.get("remote") is not None:
        return spark["remote"]
    if spark.get("master") is None:
        return os.environ.get("SPARK_REMOTE") or None
    return None


def _ignored_remote(spark: dict[str, Any]) -> str | None:
    environment = os.environ.get("SPARK_REMOTE")
    if not environment or (spark.get("master") is None and spark.get("remote") is None):
        return None
    return environment.split("/;", 1)[0]


def _remote_url(value: Any, path: Path) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text.startswith("sc://") or len(text) <= 5:
        shown = text.split(";", 1)[0] + (";..." if ";" in text else "")  # never a token in a message
        raise RatuiError("RAT-CFG-007", f"'spark.remote' must be a Spark Connect URL sc://HOST:PORT, got {shown!r}",
                         file=str(path), hint="Spark Connect servers listen on sc://HOST:15002 by default.")
    return text


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
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise RatuiError("RAT-CFG-007", f"YAML syntax error: {getattr(exc, 'problem', exc)}", file=str(path),
                         line=line + 1 if line is not None else None) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RatuiError("RAT-PRJ-006", f"cannot read {SETTINGS_FILE}: {exc}", file=str(path)) from None
    data = _mapping(raw, "ratui.yaml", path)
    _check_keys(data, TOP_KEYS, "", path)

    namespace = data.get("namespace")
    if namespace is None:
        # A project with exactly one namespace folder needs no setting.
        candidates = sorted(p.name for p in root.iterdir() if (p / "pipelines").is_dir())
        if len(candidates) != 1:
            raise RatuiError("RAT-CFG-007", "'namespace' is not set and the project has "
                             f"{len(candidates)} namespace folders", file=str(path),
                             hint="Add `namespace: NAME` to ratui.yaml: the namespace ref('layer.name') means.")
        namespace = candidates[0]
    check_name(str(namespace), "namespace", str(path))

    spark = _mapping(data.get("spark"), "spark", path)
    _check_keys(spark, SPARK_KEYS, "spark.", path)
    spark_conf_raw = _mapping(spark.get("config"), "spark.config", path)
    spark_config = dict(DEFAULT_SPARK_CONFIG)
    for key, value in spark_conf_raw.items():
        if not str(key).startswith("spark."):
            raise RatuiError("RAT-CFG-007", f"Spark setting '{key}' must start with 'spark.'", file=str(path))
        spark_config[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)

    run = _mapping(data.get("run"), "run", path)
    _check_keys(run, RUN_KEYS, "run.", path)
    quality = _mapping(data.get("quality"), "quality", path)
    _check_keys(quality, QUALITY_KEYS, "quality.", path)
    merge = _mapping(data.get("merge"), "merge", path)
    _check_keys(merge, MERGE_KEYS, "merge.", path)
    landing = _mapping(data.get("landing"), "landing", path)
    _check_keys(landing, LANDING_KEYS, "landing.", path)
    watch = _mapping(data.get("watch"), "watch", path)
    _check_keys(watch, WATCH_KEYS, "watch.", path)
    reaper = _mapping(data.get("reaper"), "reaper", path)
    _check_keys(reaper, set(REAPER_KEYS), "reaper.", path)
    paths = _mapping(data.get("paths"), "paths", path)
    _check_keys(paths, PATHS_KEYS, "paths.", path)

    return Settings(
        root=root,
        namespace=str(namespace),
        spark_master=str(spark.get("master", "local[*]")),
        spark_remote=_remote_url(_remote_setting(spark, path), path),
        spark_remote_ignored=_ignored_remote(spark),
        spark_config=spark_config,
        spark_jit=_choice(spark.get("jit", "auto"), "spark.jit", JIT_MODES, path),
        quality_sample_rows=_int(quality.get("sample_rows", 5), "quality.sample_rows", path),
        run_threads=_int(run.get("threads", 1), "run.threads", path, minimum=1),
        merge_retries=_int(merge.get("retries", 3), "merge.retries", path, minimum=1),
        merge_backoff_ms=_int(merge.get("backoff_ms", 200), "merge.backoff_ms", path),
        landing_max_attempts=_int(landing.get("max_attempts", 3), "landing.max_attempts", path, minimum=1),
        landing_bad_rows=_choice(landing.get("bad_rows", "fail"), "landing.bad_rows", BAD_ROWS, path),
        landing_columns=_choice(landing.get("columns", "strict"), "landing.columns", COLUMN_MODES, path),
        allow_outside=_folders(paths.get("allow_outside"), "paths.allow_outside", root, path),
        watch_debounce_ms=_int(watch.get("debounce_ms", 300), "watch.debounce_ms", path),
        watch_poll_seconds=_int(watch.get("poll_seconds", 30), "watch.poll_seconds", path, minimum=1),
        remote_zones=_remote_zones(landing, str(namespace), path),
        **{f"reaper_{key}": _int(reaper.get(key, default), f"reaper.{key}", path, minimum=minimum)
           for key, (default, minimum) in REAPER_KEYS.items()},
    )
