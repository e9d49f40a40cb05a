"""The pure compile step: project tree -> validated pipelines, graph and coded errors.

Reads files, runs nothing, writes nothing: the CLI compiles before any branch exists (exit code 2 on error),
and the console compiles on every reload to show errors inline while the rest of the project stays usable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ratui.engine.project.dag import Graph, build_graph, select
from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.landing.zone import open_zone
from ratui.engine.project.compile_cache import CompileCache, Entry, error_from_json, error_to_json
from ratui.engine.project import outline
from ratui.engine.project.discovery import Pipeline, discover, discover_pipeline
from ratui.engine.project.names import check_name
from ratui.engine.project.alert_terms import rule_errors
from ratui.engine.project.schedule_terms import declared_schedules
from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.project.sql_names import check_direct_names
from ratui.engine.project.templating import static_calls


@dataclass
class CompiledProject:
    settings: Settings
    pipelines: dict[str, Pipeline]  # table key -> pipeline, every discovered one (broken ones carry errors)
    graph: Graph
    errors: list[RatuiError]  # project-level problems
    reused: int = 0  # pipelines whose compile came from the compile cache (their content had not changed)
    schedules: list = dataclasses.field(default_factory=list)  # schedule_terms.Schedule, the valid ones

    def schedule(self, name: str):
        """The schedule of that name, or RAT-SCH-005."""
        for schedule in self.schedules:
            if schedule.name == name:
                return schedule
        raise RatuiError("RAT-SCH-005", f"no schedule named '{name}'",
                         hint=did_you_mean(name, [s.name for s in self.schedules]) if self.schedules else None)

    @property
    def root(self) -> Path:
        return self.settings.root

    def all_errors(self) -> list[RatuiError]:
        out = list(self.errors)
        for key in self.graph.nodes:
            out.extend(self.pipelines[key].errors)
        return out

    def select(self, selectors: list[str]) -> list[str]:
        return select(selectors, self.pipelines, self.graph, self.settings.namespace)

    def resolve(self, name: str) -> Pipeline:
        keys = self.select([name])
        return self.pipelines[keys[0]]


def compile_pipeline(pipeline: Pipeline, settings: Settings, zones: ZoneChecks | None = None) -> None:
    """Static template analysis of a discovered pipeline: its refs and landing zones (from the compile cache when
    its content was compiled before), then the landing zones' checks, which are never cached."""
    if not pipeline.ok or pipeline.kind != "sql" and pipeline.kind != "python":
        return
    zones = zones or ZoneChecks(settings)
    entry = pipeline.cached
    if entry is None or not entry.compiled:
        entry = _analyse(pipeline, entry)
    try:
        pipeline.refs, pipeline.zones = tuple(entry.refs), tuple(entry.zones)
        pipeline.ref_lines = {str(k): int(v) for k, v in entry.ref_lines.items()}
        pipeline.test_refs = [(str(key), Path(file), line if isinstance(line, int) else None)
                              for key, file, line in entry.test_refs]
        error = error_from_json(entry.error) if entry.error else None
        stage = entry.error.get("stage") if entry.error else None
        test_zones = [(str(zone), str(file)) for zone, file in entry.test_zones]
    except (TypeError, ValueError, KeyError, AttributeError):  # a cache entry of the wrong shape: compile again
        if entry.compiled and pipeline.cached is entry:
            entry.compiled = False
            return compile_pipeline(pipeline, settings, zones)
        raise
    try:
        if error is not None and stage == "pipeline":
            raise error
        for name in pipeline.zones:
            zones.check(pipeline.namespace, name, str(pipeline.file), listed=True)
        if error is not None:
            raise error
        for name, file in test_zones:
            zones.check(pipeline.namespace, name, file, listed=False)
    except RatuiError as exc:
        pipeline.errors.append(exc)


class ZoneChecks:
    """That each landing zone a compile meets exists and stays inside the project: checked once per zone per
    compile (a zone many pipelines read is opened and listed once), every compile (the folders can change
    without any pipeline changing)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._passed: set[tuple[str, str, bool]] = set()

    def check(self, namespace: str, name: str, file: str, *, listed: bool) -> None:
        if (namespace, name, listed) in self._passed or (namespace, name, True) in self._passed:
            return
        zone = open_zone(self.settings, namespace, name, file=file)
        if listed and not zone.polled:  # a folder's files are listed too: one linked in from outside is refused now
            zone.list()  # (a remote zone is listed when a run reads it)
        self._passed.add((namespace, name, listed))


def _analyse(pipeline: Pipeline, entry: Entry | None) -> Entry:
    """What a pipeline's content says (refs, zones, the tests' refs), or the first error in it, as a cache entry;
    `stage` of an error says whether the pipeline's own zones are checked before it is reported."""
    entry = entry or Entry()
    entry.refs, entry.zones, entry.ref_lines, entry.test_refs, entry.test_zones, entry.error = [], [], {}, [], [], None
    stage = "pipeline"
    try:
        file, _config = pipeline.loaded()
        if pipeline.kind == "sql":
            calls = static_calls(pipeline.text, file, pipeline.namespace)
            check_direct_names(pipeline.text, file)
        else:
            from ratui.engine.project.python_source import static_calls_python

            calls = static_calls_python(pipeline.text, file, pipeline.namespace)
        entry.refs, entry.zones, entry.ref_lines = list(calls.refs), list(calls.zones), dict(calls.lines)
        for name in calls.zones:
            check_name(name, "landing zone", str(pipeline.file))
        stage = "tests"
        for test in pipeline.tests:
            if not test.error:
                test_calls = static_calls(test.text, test.file, pipeline.namespace)
                check_direct_names(test.text, test.file)
                for name in test_calls.zones:
                    check_name(name, "landing zone", str(test.file))
                    entry.test_zones.append([name, str(test.file)])
                entry.test_refs.extend([key, str(test.file), test_calls.lines.get(key)] for key in test_calls.refs)
    except RatuiError as exc:
        entry.error = {**error_to_json(exc), "stage": stage}
    entry.compiled = True
    return entry


def compile_project(root: Path, settings: Settings | None = None, *, cache: bool = True) -> CompiledProject:
    """Compile the project; `cache`: reuse what earlier compiles found for unchanged pipelines (compile_cache.py)."""
    settings = settings or load_settings(root)
    store = CompileCache.open(settings.root) if cache else None
    found = discover(settings.root, settings.locations(), store)
    zones = ZoneChecks(settings)
    for pipeline in found.pipelines:
        _compile_one(pipeline, settings, zones, store)
    if store is None:
        return _assemble(settings, found.pipelines, found.errors, 0)
    store.save()
    compiled = _assemble(settings, found.pipelines, found.errors, store.hits)
    outline.write(compiled)  # what the console draws at its next launch, before its own compile
    return compiled


def recompile(previous: CompiledProject, changed: list[Path]) -> CompiledProject | None:
    """The project after `changed` paths changed, compiling only the pipelines they belong to (a watcher knows
    what changed: a saved file costs one pipeline's compile, not the project's). None when the change is not
    one pipeline's files or a landing zone's content (ratui.yaml, a pipeline, layer or namespace folder added or
    removed, anything else): compile the whole project then. The pipelines of `previous` are not touched."""
    root = previous.root
    again: set[str] = set()
    for path in changed:
        try:
            parts = Path(path).relative_to(root).parts
        except ValueError:
            return None
        if len(parts) >= 5 and parts[1] == "pipelines":
            key = ".".join(parts[0:1] + parts[2:4])
            if key not in previous.pipelines or not (root / Path(*parts[:4])).is_dir():
                return None
            again.add(key)
        elif len(parts) >= 4 and parts[1] == "landing":  # a zone's files (compile lists the zones it reads)
            again.update(k for k, p in previous.pipelines.items() if p.namespace == parts[0] and parts[2] in p.zones)
        else:
            return None
    settings = previous.settings
    store = CompileCache.open(settings.root)
    locations, zones = settings.locations(), ZoneChecks(settings)
    pipelines: list[Pipeline] = []
    for key, old in previous.pipelines.items():
        if key in again:
            pipeline = discover_pipeline(old.namespace, old.layer, old.folder, locations, store)
            _compile_one(pipeline, settings, zones, store)
        else:
            pipeline = dataclasses.replace(old, errors=list(old.errors[:old.compile_errors]))
        pipelines.append(pipeline)
    store.save(whole=False)  # the other pipelines' entries stay for the next full compile
    compiled = _assemble(settings, pipelines, list(previous.errors), store.hits)
    outline.write(compiled)
    return compiled


def _compile_one(pipeline: Pipeline, settings: Settings, zones: ZoneChecks, store: CompileCache | None) -> None:
    entry = pipeline.cached
    fresh = entry is not None and not entry.compiled
    compile_pipeline(pipeline, settings, zones)
    if store is not None and entry is not None and (fresh or not entry.compiled or pipeline.cached is not entry):
        store.touched()
    pipeline.cached = None
    pipeline.compile_errors = len(pipeline.errors)


def _assemble(settings: Settings, pipelines: list[Pipeline], errors: list[RatuiError], reused: int) -> CompiledProject:
    """The graph over compiled pipelines, with the errors only the whole project shows (unknown refs, cycles)."""
    graph = build_graph(pipelines)
    known = {p.key for p in pipelines}
    for pipeline in pipelines:
        for key, test_file, line in pipeline.test_refs:
            if key not in known:
                pipeline.errors.append(RatuiError(
                    "RAT-DAG-002", f"quality test {test_file.name} of {pipeline.key} refs '{key}', which no pipeline "
                    "produces", file=str(test_file), line=line,
                    hint=did_you_mean(key, known) if known else None))
    by_key = {p.key: p for p in pipelines}
    schedules, schedule_errors = declared_schedules(settings, by_key, graph)
    alert_errors = rule_errors(settings.alerts, by_key, graph, settings.namespace)
    return CompiledProject(settings, by_key, graph, [*errors, *schedule_errors, *alert_errors], reused=reused,
                           schedules=schedules)
