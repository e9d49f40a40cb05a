"""Pipeline configuration: annotations in the pipeline file win over config.yaml, which wins over defaults.

The result is one validated, typed `PipelineConfig`, whose field types are the schema (pydantic checks the merged
values with it, and schema.py turns a refusal into ratui's coded error at the annotation's or the key's line).
Validation never guesses: an unknown key or a misspelt strategy is an error naming the file and the nearest valid
word, never a silent default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import PlainValidator, TypeAdapter, ValidationError
from pydantic_core import PydanticUseDefault

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project import intervals, isolation_levels, strategy_specs
from ratui.engine.project.partition_terms import parse_partition_by
from ratui.engine.project.freshness_terms import Freshness, pipeline_freshness
from ratui.engine.project.schedule_terms import pipeline_schedule
from ratui.engine.project.schema import YamlDoc, coded_error, invalid, one_of, read_yaml
from ratui.engine.project.settings_schema import BAD_ROWS, COLUMN_MODES

STRATEGIES = strategy_specs.NAMES
# Strategies the write phase implements today; the others are rejected up front, never approximated.
SUPPORTED_STRATEGIES = STRATEGIES
KEYED_STRATEGIES = strategy_specs.KEYED
MATERIALIZATIONS = ("table",)
LANDING_MODES = ("all", "new_files")
# per pipeline, over ratui.yaml's landing.bad_rows / landing.columns (see landing/reader.py)
LANDING_BAD_ROWS = BAD_ROWS
LANDING_COLUMNS = COLUMN_MODES
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TAG = re.compile(r"^[A-Za-z0-9_-]+$")


def _as_list(value: Any) -> tuple[str, ...]:
    """A YAML list, or comma-separated text (an annotation's value is always text)."""
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    else:
        items = [part.strip() for part in str(value).split(",")]
    return tuple(item for item in items if item)


def _column(value: Any) -> str:
    text = str(value).strip()
    if not _COLUMN.match(text):
        raise invalid(f"{{where}} must be a column name, got '{value}'", "RAT-CFG-005")
    return text


def _optional_column(value: Any) -> str:
    if not str(value).strip():  # blank text (quoted, in config.yaml): the key's default
        raise PydanticUseDefault()
    return _column(value)


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off", ""):
        return False
    raise invalid(f"{{where}} must be true or false, got '{value}'", "RAT-CFG-005")


def _tags(value: Any) -> tuple[str, ...]:
    tags = _as_list(value)
    for tag in tags:
        if not _TAG.match(tag):
            raise invalid(f"tag '{tag}' may hold only letters, digits, '_' and '-'", "RAT-CFG-005")
    return tags


def _partition_by(value: Any) -> tuple[str, ...]:
    try:
        return tuple(str(term) for term in parse_partition_by(_as_list(value)))
    except ValueError as exc:
        raise invalid(f"partition_by: {exc}", "RAT-CFG-005", hint=(
            "Write partition_by as a list of column or transform(column), transform one of identity, year, month, "
            "day, hour: e.g. [day(order_ts), country].")) from None


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 2**10, "kib": 2**10, "mb": 2**20, "mib": 2**20, "gb": 2**30, "gib": 2**30}


def _file_size(value: Any) -> int | None:
    """A data file size: bytes as a number, or text like `128MB` / `256 MiB` / `1GB` (binary units)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise PydanticUseDefault()
    found = _SIZE.match(str(value).strip()) if not isinstance(value, bool) else None
    size = int(float(found.group(1)) * _UNITS[(found.group(2) or "b").lower()]) if found else 0
    if size < 2**20:
        raise invalid(f"{{where}} must be a size of at least 1MB (e.g. 128MB, 256MB, 1GB), got '{value}'",
                      "RAT-CFG-005")
    return size


_LIMIT = re.compile(r"^(\d+(?:\.\d+)?)\s*(%?)$")
_LIMIT_HINT = ("Write a limit as a percentage of the table's rows before the run (`20%`) or as a number of rows "
               "(`500`); docs/concepts/pipelines.md: Data diffs.")


def _limit(value: Any) -> str | None:
    """A data diff gate's limit: a percentage of the rows before the run ("20%") or a number of rows ("500")."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise PydanticUseDefault()
    found = _LIMIT.match(str(value).strip()) if not isinstance(value, bool) else None
    if found is None or (not found.group(2) and "." in found.group(1)):
        raise invalid(f"{{where}} must be a percentage (20%) or a number of rows (500), got '{value}'",
                      "RAT-CFG-005", hint=_LIMIT_HINT)
    return f"{found.group(1)}{found.group(2)}"


def _null_limits(value: Any) -> tuple[str, ...]:
    """max_null_increase: `email 1%` items (a mapping {email: 1%} in config.yaml, or comma-separated text), each
    the largest rise of a column's share of NULLs, in percentage points of its rows."""
    if isinstance(value, dict):
        items = [f"{k} {v}" for k, v in value.items()]
    else:
        items = list(_as_list(value))
    out: dict[str, str] = {}
    for item in items:
        parts = item.split()
        found = _LIMIT.match(parts[1]) if len(parts) == 2 else None
        if found is None or not found.group(2) or float(found.group(1)) > 100 or not _COLUMN.match(parts[0]):
            raise invalid(f"{{where}} items must be a column and a percentage (email 1%), got '{item}'",
                          "RAT-CFG-005", hint="Write `-- @max_null_increase: email 1%, phone 0%`: each column's "
                          "share of NULLs may rise by at most that many percentage points.")
        if parts[0] in out:
            raise invalid(f"{{where}} names column '{parts[0]}' twice", "RAT-CFG-005")
        out[parts[0]] = f"{found.group(1)}%"
    return tuple(f"{column} {limit}" for column, limit in out.items())


def parse_limit(text: str) -> tuple[float, bool]:
    """A validated limit as (number, is a percentage)."""
    return (float(text[:-1]), True) if text.endswith("%") else (float(text), False)


def _lookback(value: Any) -> int:
    text = str(value).strip()
    if not text.isdigit():
        raise invalid(f"{{where}} must be a whole number of intervals (0 or more), got '{value}'", "RAT-CFG-005")
    return int(text)


def _start_time(value: Any) -> str | None:
    if not str(value).strip():
        raise PydanticUseDefault()
    try:
        return intervals.iso(intervals.parse_time(value, "RAT-CFG-005"))
    except RatuiError:
        raise invalid(f"{{where}} must be an ISO date or timestamp (2026-01-01), got '{value}'",
                      "RAT-CFG-005") from None


def _choice(choices: tuple[str, ...], message: str, code: str = "RAT-CFG-005", hint: str | None = None) -> Any:
    return PlainValidator(one_of(choices, code, message, fold=str, hint=hint))


# The field types of a pipeline's configuration: each takes YAML's value or an annotation's text.
Strategy = Annotated[str, _choice(STRATEGIES, "unknown merge strategy '{text}'", "RAT-CFG-001")]
Column = Annotated[str, PlainValidator(_optional_column)]
OptionalColumn = Annotated[str | None, PlainValidator(_optional_column)]
Columns = Annotated[tuple[str, ...], PlainValidator(lambda value: tuple(_column(k) for k in _as_list(value)))]
Text = Annotated[str, PlainValidator(lambda value: str(value).strip())]
Flag = Annotated[bool, PlainValidator(_as_bool)]
FileSize = Annotated[int | None, PlainValidator(_file_size)]
LandingMode = Annotated[str, _choice(LANDING_MODES, "unknown landing_mode '{text}'")]
BadRows = Annotated[str | None, _choice(LANDING_BAD_ROWS, "unknown landing_bad_rows '{text}'")]
ColumnMode = Annotated[str | None, _choice(LANDING_COLUMNS, "unknown landing_columns '{text}'")]
Materialization = Annotated[str, _choice(MATERIALIZATIONS, "materialized '{text}' is not supported", hint=(
    "Pipelines materialize as Iceberg tables: use `table` (the default)."))]
Tags = Annotated[tuple[str, ...], PlainValidator(_tags)]
PartitionBy = Annotated[tuple[str, ...], PlainValidator(_partition_by)]
Limit = Annotated[str | None, PlainValidator(_limit)]
NullLimits = Annotated[tuple[str, ...], PlainValidator(_null_limits)]
PipelineSchedule = Annotated[tuple[str, str] | None, PlainValidator(pipeline_schedule)]
PipelineFreshness = Annotated[Freshness | None, PlainValidator(pipeline_freshness)]
Isolation = Annotated[str | None, _choice(isolation_levels.NAMES, "unknown isolation '{text}'", hint=(
    f"Write isolation as {isolation_levels.listed()} (docs/concepts/isolation.md)."))]

Batch = Annotated[str, _choice(intervals.BATCHES, "unknown batch '{text}'", hint="Use one of: hour, day, month.")]
Lookback = Annotated[int, PlainValidator(_lookback)]
StartTime = Annotated[str | None, PlainValidator(_start_time)]

# `-- @key: value` in SQL, `# @key: value` in Python.
_ANNOTATION = {
    ".sql": re.compile(r"^\s*--\s*@([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$"),
    ".py": re.compile(r"^\s*#\s*@([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$"),
}
_COMMENT = {".sql": re.compile(r"^\s*--"), ".py": re.compile(r"^\s*#")}


@dataclass(frozen=True)
class Annotation:
    key: str
    value: str
    line: int


@dataclass(frozen=True)
class PipelineConfig:
    """A pipeline's configuration, and its schema: each field's type says what a value may be (resolve_config
    validates annotations and config.yaml with it). Built directly, as tests and the writer do, nothing is checked."""

    merge_strategy: Strategy = "full_refresh"
    unique_key: Columns = ()
    watermark_column: OptionalColumn = None
    description: Text = ""
    partition_column: OptionalColumn = None
    archive_landing_zones: Flag = False
    # all: landing_zone() reads every active file; new_files: only files this pipeline has not loaded yet
    landing_mode: LandingMode = "all"
    landing_bad_rows: BadRows = None  # None: ratui.yaml's landing.bad_rows
    landing_columns: ColumnMode = None  # None: ratui.yaml's landing.columns
    scd_valid_from: Column = "valid_from"
    scd_valid_to: Column = "valid_to"
    materialized: Materialization = "table"
    tags: Tags = ()
    # Iceberg partition spec terms, normalised: "day(order_ts)", "country" (identity); see partitioning.py
    partition_by: PartitionBy = ()
    # the size the table's data files are written at (bytes; None: the table's write.target-file-size-bytes,
    # else write/files.py's TARGET_FILE_BYTES); see write/files.py
    target_file_size: FileSize = None
    # a Python pipeline's isolation level over ratui.yaml's python.isolation (None: the project's)
    isolation: Isolation = None
    # data diff gates (run/data_diff.py): the run fails (RAT-RUN-009) before its merge when its diff exceeds them
    max_row_change: Limit = None  # rows added + removed + changed
    max_rows_removed: Limit = None
    max_null_increase: NullLimits = ()  # "email 1%": the column's NULL share may rise by at most 1 point
    # incremental_by_time (project/intervals.py): the column whose intervals a run replaces, their length, how many
    # done intervals a plain run takes again before the first missing one, and the first interval's start
    time_column: OptionalColumn = None
    batch: Batch = "day"
    lookback: Lookback = 0
    start: StartTime = None
    # when the pipeline runs by itself, unattended (schedule_terms.py): (cron, time zone), None: never
    schedule: PipelineSchedule = None
    # how old its table may get on main before it is stale (freshness_terms.py; `ratui check --freshness`, alerts)
    freshness: PipelineFreshness = None
    # where each key's value came from: "annotation", "config.yaml" or "default"
    origin: dict[str, str] = field(default_factory=dict, compare=False)
    # the file and line of each key that was set (a project-level check's error points there)
    where: dict[str, tuple[str, int | None]] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value.to_dict() if hasattr(value, "to_dict")
                else value for key in KEYS for value in (getattr(self, key),)}


# the keys a pipeline may set, in the schema's order
KEYS = tuple(f.name for f in fields(PipelineConfig) if f.name not in ("origin", "where"))


def parse_annotations(text: str, file: Path) -> list[Annotation]:
    """Annotations from the header of a pipeline or quality-test file.

    The header is the run of comment and blank lines at the top. An annotation-looking comment after the
    body began is an error: it would otherwise be silently ignored.
    """
    suffix = file.suffix if file.suffix in _ANNOTATION else ".sql"
    ann_re, comment_re = _ANNOTATION[suffix], _COMMENT[suffix]
    found: list[Annotation] = []
    in_header = True
    for number, line in enumerate(text.splitlines(), start=1):
        match = ann_re.match(line)
        if match:
            if not in_header:
                raise RatuiError("RAT-CFG-009", f"annotation '@{match.group(1)}' on line {number} comes after the "
                                 "body began and would be ignored", file=str(file), line=number)
            found.append(Annotation(match.group(1), match.group(2), number))
        elif line.strip() and not comment_re.match(line):
            in_header = False
    return found


def _config_doc(path: Path) -> YamlDoc:
    if not path.is_file():
        return YamlDoc({})
    doc = read_yaml(path, "RAT-CFG-006")
    if doc.data is None:
        return YamlDoc({})
    if not isinstance(doc.data, dict):
        raise RatuiError("RAT-CFG-006", f"config.yaml holds a {type(doc.data).__name__}, not a mapping",
                         file=str(path))
    return doc


def load_config_yaml(path: Path) -> dict[str, Any]:
    return _config_doc(path).data


def resolve_config(pipeline_file: Path, text: str, config_file: Path) -> PipelineConfig:
    """Merge annotations > config.yaml > defaults and validate the result."""
    annotations = parse_annotations(text, pipeline_file)
    doc = _config_doc(config_file)

    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    where: dict[str, tuple[str, int | None]] = {}
    for key, value in doc.data.items():
        key = str(key)
        line = doc.line((key,))
        if key not in KEYS:
            raise RatuiError("RAT-CFG-002", f"unknown key '{key}' in config.yaml", file=str(config_file),
                             line=line, hint=did_you_mean(key, KEYS))
        if value is None or (isinstance(value, (str, list, tuple, dict)) and not value):
            raise RatuiError("RAT-CFG-005", f"'{key}' in config.yaml has no value", file=str(config_file),
                             line=line, hint=f"Give {key} a value, or remove the key.")
        values[key], origin[key], where[key] = value, "config.yaml", (str(config_file), line)
    seen: set[str] = set()
    for ann in annotations:
        if ann.key not in KEYS:
            raise RatuiError("RAT-CFG-002", f"unknown annotation '@{ann.key}'", file=str(pipeline_file),
                             line=ann.line, hint=did_you_mean(ann.key, KEYS))
        if ann.key in seen:
            raise RatuiError("RAT-CFG-005", f"annotation '@{ann.key}' appears twice", file=str(pipeline_file),
                             line=ann.line, hint="Keep one annotation per key.")
        seen.add(ann.key)
        if not ann.value.strip():  # its own error at its own line, not a later rule's at another annotation's
            raise RatuiError("RAT-CFG-005", f"annotation '@{ann.key}' has no value", file=str(pipeline_file),
                             line=ann.line, hint=f"Give @{ann.key} a value after the colon, or remove the line.")
        values[ann.key], origin[ann.key], where[ann.key] = ann.value, "annotation", (str(pipeline_file), ann.line)
    for key in KEYS:
        origin.setdefault(key, "default")

    def locate(loc: tuple[str, ...]) -> tuple[str, int | None]:
        return where.get(loc[0] if loc else "", (str(pipeline_file), None))

    try:
        config = _SCHEMA.validate_python({**values, "origin": origin, "where": where})
    except ValidationError as exc:
        raise coded_error(exc, "RAT-CFG-005", locate, "config") from None
    if config.isolation is not None and pipeline_file.suffix != ".py":
        file, line = locate(("isolation",))
        raise RatuiError("RAT-CFG-005", "isolation applies to Python pipelines; SQL runs on ratui's Spark",
                         file=file, line=line, hint="Remove the isolation setting from this SQL pipeline.")
    file, line = locate(("merge_strategy",))
    spec = strategy_specs.BY_NAME.get(config.merge_strategy)
    if spec is not None and spec.needs_key and not config.unique_key:
        raise RatuiError("RAT-CFG-003", f"merge strategy '{config.merge_strategy}' needs a unique_key", file=file,
                         line=line)
    if spec is not None and spec.needs_partition_column and not config.partition_column:
        raise strategy_specs.strategy_error("RAT-CFG-004", f"merge strategy '{config.merge_strategy}' needs a "
                                            "partition_column", file=file, line=line)
    if spec is not None and spec.needs_time_column and not config.time_column:
        raise strategy_specs.strategy_error("RAT-CFG-011", f"merge strategy '{config.merge_strategy}' needs a "
                                            "time_column", file=file, line=line)
    if config.merge_strategy not in SUPPORTED_STRATEGIES:
        raise strategy_specs.strategy_error("RAT-CFG-008", f"merge strategy '{config.merge_strategy}' is not "
                                            "supported yet", file=file, line=line)
    return config


_SCHEMA = TypeAdapter(PipelineConfig)
