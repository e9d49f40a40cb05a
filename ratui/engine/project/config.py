"""Pipeline configuration: annotations in the pipeline file win over config.yaml, which wins over defaults.

The result is one validated, typed `PipelineConfig`. Validation never guesses: an unknown key or a
misspelt strategy is an error naming the file and the nearest valid word, never a silent default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project import strategy_specs

STRATEGIES = strategy_specs.NAMES
# Strategies the write phase implements today; the others are rejected up front, never approximated.
SUPPORTED_STRATEGIES = STRATEGIES
KEYED_STRATEGIES = strategy_specs.KEYED
MATERIALIZATIONS = ("table",)

KEYS = (
    "merge_strategy",
    "unique_key",
    "watermark_column",
    "description",
    "partition_column",
    "archive_landing_zones",
    "scd_valid_from",
    "scd_valid_to",
    "materialized",
    "tags",
    "partition_by",
    "landing_mode",
    "landing_bad_rows",
    "landing_columns",
)
LANDING_MODES = ("all", "new_files")
# per pipeline, over ratui.yaml's landing.bad_rows / landing.columns (see landing/reader.py)
LANDING_BAD_ROWS = ("fail", "skip")
LANDING_COLUMNS = ("strict", "union")

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
    merge_strategy: str = "full_refresh"
    unique_key: tuple[str, ...] = ()
    watermark_column: str | None = None
    description: str = ""
    partition_column: str | None = None
    archive_landing_zones: bool = False
    # all: landing_zone() reads every active file; new_files: only files this pipeline has not loaded yet
    landing_mode: str = "all"
    landing_bad_rows: str | None = None  # None: ratui.yaml's landing.bad_rows
    landing_columns: str | None = None  # None: ratui.yaml's landing.columns
    scd_valid_from: str = "valid_from"
    scd_valid_to: str = "valid_to"
    materialized: str = "table"
    tags: tuple[str, ...] = ()
    # Iceberg partition spec terms, normalised: "day(order_ts)", "country" (identity); see partitioning.py
    partition_by: tuple[str, ...] = ()
    # where each key's value came from: "annotation", "config.yaml" or "default"
    origin: dict[str, str] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "merge_strategy": self.merge_strategy,
            "unique_key": list(self.unique_key),
            "watermark_column": self.watermark_column,
            "description": self.description,
            "partition_column": self.partition_column,
            "archive_landing_zones": self.archive_landing_zones,
            "landing_mode": self.landing_mode,
            "landing_bad_rows": self.landing_bad_rows,
            "landing_columns": self.landing_columns,
            "scd_valid_from": self.scd_valid_from,
            "scd_valid_to": self.scd_valid_to,
            "materialized": self.materialized,
            "tags": list(self.tags),
            "partition_by": list(self.partition_by),
        }


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


def _as_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    else:
        items = [part.strip() for part in str(value).split(",")]
    return tuple(item for item in items if item)


def _as_bool(value: Any, key: str, file: str, line: int | None) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off", ""):
        return False
    raise RatuiError("RAT-CFG-005", f"'{key}' must be true or false, got '{value}'", file=file, line=line)


def _column(value: Any, key: str, file: str, line: int | None) -> str:
    text = str(value).strip()
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", text):
        raise RatuiError("RAT-CFG-005", f"'{key}' must be a column name, got '{value}'", file=file, line=line)
    return text


def load_config_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RatuiError("RAT-CFG-006", f"YAML syntax error: {getattr(exc, 'problem', exc)}", file=str(path),
                         line=mark.line + 1 if mark else None) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RatuiError("RAT-PRJ-006", f"cannot read config.yaml: {exc}", file=str(path)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RatuiError("RAT-CFG-006", f"config.yaml holds a {type(data).__name__}, not a mapping", file=str(path))
    return data


def _yaml_line(path: Path, key: str) -> int | None:
    """The line of a top-level key in a YAML file (for errors that name it), or None."""
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if re.match(rf"^{re.escape(key)}\s*:", line):
                return number
    except (OSError, UnicodeDecodeError):
        pass
    return None


def resolve_config(pipeline_file: Path, text: str, config_file: Path) -> PipelineConfig:
    """Merge annotations > config.yaml > defaults and validate the result."""
    annotations = parse_annotations(text, pipeline_file)
    yaml_values = load_config_yaml(config_file)

    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    where: dict[str, tuple[str, int | None]] = {}
    for key, value in yaml_values.items():
        key = str(key)
        if key not in KEYS:
            raise RatuiError("RAT-CFG-002", f"unknown key '{key}' in config.yaml", file=str(config_file),
                             hint=did_you_mean(key, KEYS))
        if value is None or (isinstance(value, (str, list, tuple, dict)) and not value):
            raise RatuiError("RAT-CFG-005", f"'{key}' in config.yaml has no value", file=str(config_file),
                             line=_yaml_line(config_file, key),
                             hint=f"Give {key} a value, or remove the key.")
        values[key], origin[key], where[key] = value, "config.yaml", (str(config_file), _yaml_line(config_file, key))
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

    def loc(key: str) -> tuple[str, int | None]:
        return where.get(key, (str(pipeline_file), None))

    kwargs: dict[str, Any] = {}
    if "merge_strategy" in values:
        strategy = str(values["merge_strategy"]).strip()
        if strategy not in STRATEGIES:
            file, line = loc("merge_strategy")
            raise RatuiError("RAT-CFG-001", f"unknown merge strategy '{strategy}'", file=file, line=line,
                             hint=did_you_mean(strategy, STRATEGIES))
        kwargs["merge_strategy"] = strategy
    if "unique_key" in values:
        keys = _as_list(values["unique_key"])
        kwargs["unique_key"] = tuple(_column(k, "unique_key", *loc("unique_key")) for k in keys)
    for key in ("watermark_column", "partition_column", "scd_valid_from", "scd_valid_to"):
        if key in values and str(values[key]).strip():
            kwargs[key] = _column(values[key], key, *loc(key))
    if "description" in values:
        kwargs["description"] = str(values["description"]).strip()
    if "landing_mode" in values:
        mode = str(values["landing_mode"]).strip()
        if mode not in LANDING_MODES:
            file, line = loc("landing_mode")
            raise RatuiError("RAT-CFG-005", f"unknown landing_mode '{mode}'", file=file, line=line,
                             hint=did_you_mean(mode, LANDING_MODES))
        kwargs["landing_mode"] = mode
    for key, choices in (("landing_bad_rows", LANDING_BAD_ROWS), ("landing_columns", LANDING_COLUMNS)):
        if key in values:
            choice = str(values[key]).strip()
            if choice not in choices:
                file, line = loc(key)
                raise RatuiError("RAT-CFG-005", f"unknown {key} '{choice}'", file=file, line=line,
                                 hint=did_you_mean(choice, choices))
            kwargs[key] = choice
    if "archive_landing_zones" in values:
        kwargs["archive_landing_zones"] = _as_bool(values["archive_landing_zones"], "archive_landing_zones",
                                                   *loc("archive_landing_zones"))
    if "materialized" in values:
        mat = str(values["materialized"]).strip()
        if mat not in MATERIALIZATIONS:
            file, line = loc("materialized")
            raise RatuiError("RAT-CFG-005", f"materialized '{mat}' is not supported", file=file, line=line,
                             hint="Pipelines materialize as Iceberg tables: use `table` (the default).")
        kwargs["materialized"] = mat
    if "tags" in values:
        tags = _as_list(values["tags"])
        for tag in tags:
            if not re.match(r"^[A-Za-z0-9_-]+$", tag):
                raise RatuiError("RAT-CFG-005", f"tag '{tag}' may hold only letters, digits, '_' and '-'",
                                 file=loc("tags")[0], line=loc("tags")[1])
        kwargs["tags"] = tags
    if "partition_by" in values:
        from ratui.engine.project.partition_terms import parse_partition_by

        try:
            terms = parse_partition_by(_as_list(values["partition_by"]))
        except ValueError as exc:
            file, line = loc("partition_by")
            raise RatuiError("RAT-CFG-005", f"partition_by: {exc}", file=file, line=line,
                             hint="Write partition_by as a list of column or transform(column), transform one "
                                  "of identity, year, month, day, hour: e.g. [day(order_ts), country].") from None
        kwargs["partition_by"] = tuple(str(t) for t in terms)

    config = PipelineConfig(**kwargs, origin=origin)
    file, line = loc("merge_strategy")
    spec = strategy_specs.BY_NAME.get(config.merge_strategy)
    if spec is not None and spec.needs_key and not config.unique_key:
        raise RatuiError("RAT-CFG-003", f"merge strategy '{config.merge_strategy}' needs a unique_key", file=file,
                         line=line)
    if spec is not None and spec.needs_partition_column and not config.partition_column:
        raise RatuiError("RAT-CFG-004", f"merge strategy '{config.merge_strategy}' needs a partition_column",
                         file=file, line=line)
    if config.merge_strategy not in SUPPORTED_STRATEGIES:
        raise RatuiError("RAT-CFG-008", f"merge strategy '{config.merge_strategy}' is not supported yet",
                         file=file, line=line)
    return config
