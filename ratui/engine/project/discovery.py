"""Discovery of the project tree: namespaces, layers, pipelines, quality tests and landing zones.

    {namespace}/pipelines/{layer}/{name}/pipeline.sql | pipeline.py
    {namespace}/pipelines/{layer}/{name}/config.yaml            (optional)
    {namespace}/pipelines/{layer}/{name}/tests/quality/*.sql
    {namespace}/landing/{zone}/                                  (landing zones: see landing/)

Discovery reads files but runs nothing. Problems are collected, not raised: one broken pipeline must not
hide the rest of the project from the console. A folder or file that is a symlink to a place outside the project
(and outside every folder ratui.yaml allows) is an error (RAT-PTH-001), never followed.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ratui.engine.project.compile_cache import CompileCache, Entry, config_from_json, config_to_json, \
    error_from_json, error_to_json
from ratui.engine.project.config import PipelineConfig, parse_annotations, resolve_config
from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.locations import ProjectLocations
from ratui.engine.project.names import LAYERS, name_problem

SEVERITIES = ("error", "warn")
QUALITY_KEYS = ("severity", "description")


@dataclass(frozen=True)
class QualityTest:
    name: str
    file: Path
    text: str
    severity: str = "error"
    description: str = ""
    error: RatuiError | None = None


@dataclass
class Pipeline:
    namespace: str
    layer: str
    name: str
    folder: Path
    file: Path | None = None
    kind: str | None = None  # "sql" | "python"
    text: str = ""
    config: PipelineConfig | None = None
    refs: tuple[str, ...] = ()  # table keys this pipeline reads
    zones: tuple[str, ...] = ()  # landing zones this pipeline reads
    tests: list[QualityTest] = field(default_factory=list)
    errors: list[RatuiError] = field(default_factory=list)
    ref_lines: dict[str, int] = field(default_factory=dict)  # ref key -> line of its first ref() call
    test_refs: list[tuple[str, Path, int | None]] = field(default_factory=list)  # (key, test file, line)
    # what an earlier compile of the same content found (compile_cache.py), while this compile runs
    cached: Entry | None = field(default=None, repr=False, compare=False)
    # how many of `errors` its own compile found (the rest are the whole project's: unknown refs, cycles)
    compile_errors: int = field(default=0, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}.{self.layer}.{self.name}"

    @property
    def ok(self) -> bool:
        return not self.errors

    def loaded(self) -> tuple[Path, PipelineConfig]:
        """The pipeline file and configuration of a pipeline that compiled (RAT-PRJ-004 if it has none)."""
        if self.file is None or self.config is None:
            raise RatuiError("RAT-PRJ-004", f"{self.key} has no readable pipeline file", file=str(self.folder))
        return self.file, self.config

    def fingerprint(self) -> str:
        """A hash of the definition (pipeline file, config.yaml, quality tests): changes when the pipeline does."""
        digest = hashlib.sha256(self.text.encode())
        config = self.folder / "config.yaml"
        if config.is_file():
            digest.update(config.read_bytes())
        for test in self.tests:
            digest.update(test.name.encode() + test.text.encode())
        return digest.hexdigest()[:16]


_SQL_COMMENTS = re.compile(r"\{#.*?#\}|/\*.*?\*/|--[^\n]*", re.S)


def has_statement(text: str) -> bool:
    """False for a SQL file of nothing but blanks and comments (SQL or Jinja)."""
    return bool(_SQL_COMMENTS.sub("", text).strip().strip(";").strip())


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RatuiError("RAT-PRJ-006", f"cannot read {path.name}: {exc}", file=str(path)) from None


def _visible_dirs(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))


def _entries(folder: Path) -> dict[str, bool] | None:
    """The names in a folder, each with whether it is a symlink (one directory read); None if it is no folder."""
    try:
        with os.scandir(folder) as found:
            return {entry.name: entry.is_symlink() for entry in found}
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return {} if folder.is_dir() else None


def _not_a_file(path: Path) -> RatuiError | None:
    """A pipeline file, config.yaml or quality test that is there but cannot be read as a file."""
    if path.is_symlink() and not path.exists():
        return RatuiError("RAT-PRJ-006", f"{path.name} is a broken symlink (to {os.readlink(path)})", file=str(path))
    if path.exists() and not path.is_file():
        return RatuiError("RAT-PRJ-006", f"{path.name} is a folder, not a file", file=str(path))
    return None


def _escape(locations: ProjectLocations | None, path: Path, what: str) -> RatuiError | None:
    if locations is None:
        return None
    try:
        locations.check(path, what)
    except RatuiError as exc:
        return exc
    return None


def discover_quality_tests(folder: Path, locations: ProjectLocations | None = None) -> list[QualityTest]:
    tests_dir = folder / "tests" / "quality"
    found: list[QualityTest] = []
    entries = _entries(tests_dir)
    if entries is None:
        return found
    folder_escape = _escape(locations, tests_dir, "quality-test folder") if entries else None
    for file_name in sorted(n for n in entries if n.endswith(".sql")):
        path = tests_dir / file_name
        name = path.stem
        try:
            # a file that is not a symlink lies where its folder does: only a symlink can lead elsewhere
            escape = folder_escape or (_escape(locations, path, "quality test") if entries[file_name] else None)
            if escape:
                raise escape
            text = read_text(path)
            if not has_statement(text):
                raise RatuiError("RAT-PRJ-007", f"quality test {path.name} holds no query", file=str(path),
                                 hint="A quality test is a SELECT returning the violating rows (0 rows = pass).")
            severity, description = "error", ""
            for ann in parse_annotations(text, path):
                if ann.key == "severity":
                    severity = ann.value.strip().lower()
                    if severity not in SEVERITIES:
                        raise RatuiError("RAT-CFG-005", f"unknown severity '{ann.value}'", file=str(path),
                                         line=ann.line, hint=did_you_mean(severity, SEVERITIES))
                elif ann.key == "description":
                    description = ann.value
                else:
                    raise RatuiError("RAT-CFG-002", f"unknown quality-test annotation '@{ann.key}'", file=str(path),
                                     line=ann.line, hint=did_you_mean(ann.key, QUALITY_KEYS))
            found.append(QualityTest(name, path, text, severity, description))
        except RatuiError as exc:
            found.append(QualityTest(name, path, "", error=exc))
    return found


def discover_pipeline(namespace: str, layer: str, folder: Path,
                      locations: ProjectLocations | None = None, cache: CompileCache | None = None) -> Pipeline:
    pipeline = Pipeline(namespace, layer, folder.name, folder)
    problem = name_problem(folder.name)
    if problem:
        pipeline.errors.append(RatuiError("RAT-PRJ-001", f"pipeline name '{folder.name[:40]}' {problem}",
                                          file=str(folder)))
        return pipeline
    escape = _escape(locations, folder, "pipeline folder")
    if escape:
        pipeline.errors.append(escape)
        return pipeline
    sql, py = folder / "pipeline.sql", folder / "pipeline.py"
    entries = _entries(folder) or {}
    for path in (sql, py, folder / "config.yaml"):
        if path.name not in entries:
            continue
        refused = _not_a_file(path) or (_escape(locations, path, path.name) if entries[path.name] else None)
        if refused:
            pipeline.errors.append(refused)
            return pipeline
    if sql.is_file() and py.is_file():
        pipeline.errors.append(RatuiError("RAT-PRJ-003", f"{pipeline.key} has both pipeline.sql and pipeline.py",
                                          file=str(folder)))
        return pipeline
    if not sql.is_file() and not py.is_file():
        pipeline.errors.append(RatuiError("RAT-PRJ-004", f"{pipeline.key} has neither pipeline.sql nor pipeline.py",
                                          file=str(folder)))
        return pipeline
    pipeline.file, pipeline.kind = (sql, "sql") if sql.is_file() else (py, "python")
    pipeline.tests = discover_quality_tests(folder, locations)
    pipeline.errors.extend(t.error for t in pipeline.tests if t.error)
    try:
        pipeline.text = read_text(pipeline.file)
        if pipeline.kind == "sql" and not has_statement(pipeline.text):
            raise RatuiError("RAT-PRJ-007", f"{pipeline.file.name} of {pipeline.key} holds no SQL statement",
                             file=str(pipeline.file))
    except RatuiError as exc:
        pipeline.errors.append(exc)
        return pipeline
    entry = pipeline.cached = _cache_entry(cache, pipeline) if cache is not None else None
    try:
        if entry is not None and entry.config_error is not None:
            raise error_from_json(entry.config_error)
        if entry is not None and entry.config is not None:
            pipeline.config = config_from_json(entry.config)
            return pipeline
    except (TypeError, ValueError, KeyError):  # an entry of the wrong shape: compile it again
        entry = pipeline.cached = Entry()
        cache.touched()  # type: ignore[union-attr]
    except RatuiError as exc:
        pipeline.errors.append(exc)
        return pipeline
    try:
        pipeline.config = resolve_config(pipeline.file, pipeline.text, folder / "config.yaml")
        if entry is not None:
            entry.config = config_to_json(pipeline.config)
    except RatuiError as exc:
        pipeline.errors.append(exc)
        if entry is not None:
            entry.config_error = error_to_json(exc)
    if entry is not None:
        cache.touched()  # type: ignore[union-attr]
    return pipeline


def _cache_entry(cache: CompileCache, pipeline: Pipeline) -> Entry:
    """The cache entry of a pipeline's content: its files' names and bytes (config.yaml's too) and which of its
    quality tests could be read."""
    assert pipeline.file is not None
    config = pipeline.folder / "config.yaml"
    try:
        config_bytes = config.read_bytes() if config.is_file() else b"\0absent"
    except OSError:
        config_bytes = b"\0unreadable"
    parts = [pipeline.kind.encode() if pipeline.kind else b"", str(pipeline.file).encode(), pipeline.text.encode(),
             config_bytes]
    for test in pipeline.tests:
        parts += [str(test.file).encode(), b"error" if test.error else test.text.encode()]
    return cache.get(cache.key(parts))


@dataclass
class Discovery:
    pipelines: list[Pipeline]
    errors: list[RatuiError]  # problems not tied to one pipeline (bad layer folder, bad namespace name)


def discover(root: Path, locations: ProjectLocations | None = None, cache: CompileCache | None = None) -> Discovery:
    locations = locations or ProjectLocations(root)
    pipelines: list[Pipeline] = []
    errors: list[RatuiError] = []
    for ns_dir in _visible_dirs(root):
        if not (ns_dir / "pipelines").is_dir():
            continue
        problem = name_problem(ns_dir.name)
        if problem:
            errors.append(RatuiError("RAT-PRJ-001", f"namespace name '{ns_dir.name[:40]}' {problem}",
                                     file=str(ns_dir)))
            continue
        escape = _escape(locations, ns_dir, "namespace folder") or _escape(locations, ns_dir / "pipelines",
                                                                             "pipelines folder")
        if escape:
            errors.append(escape)
            continue
        for layer_dir in _visible_dirs(ns_dir / "pipelines"):
            if layer_dir.name not in LAYERS:
                errors.append(RatuiError("RAT-PRJ-002", f"'{layer_dir.name}' is not a layer",
                                         file=str(layer_dir), hint=did_you_mean(layer_dir.name, LAYERS)))
                continue
            escape = _escape(locations, layer_dir, "layer folder")
            if escape:
                errors.append(escape)
                continue
            for folder in _visible_dirs(layer_dir):
                pipelines.append(discover_pipeline(ns_dir.name, layer_dir.name, folder, locations, cache))
    return Discovery(pipelines, errors)


def table_folder(root: Path, key: str) -> Path:
    """Where ratui creates the table of a pipeline key (namespace.layer.name): its metadata/ and data/ folders."""
    namespace, layer, name = key.split(".")
    return root / namespace / "warehouse" / layer / name
