"""The pure compile step: project tree -> validated pipelines, graph and coded errors.

Reads files, runs nothing, writes nothing: the CLI compiles before any branch exists (exit code 2 on error),
and the console compiles on every reload to show errors inline while the rest of the project stays usable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ratui.engine.project.dag import Graph, build_graph, select
from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.landing.zone import open_zone
from ratui.engine.project.discovery import Pipeline, discover
from ratui.engine.project.names import check_name
from ratui.engine.project.settings import Settings, load_settings
from ratui.engine.project.sql_names import check_direct_names
from ratui.engine.project.templating import static_calls


@dataclass
class CompiledProject:
    settings: Settings
    pipelines: dict[str, Pipeline]  # table key -> pipeline, every discovered one (broken ones carry errors)
    graph: Graph
    errors: list[RatuiError]  # project-level problems

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


def compile_pipeline(pipeline: Pipeline, settings: Settings) -> None:
    """Static template analysis of a discovered pipeline: its refs and landing zones."""
    if not pipeline.ok or pipeline.kind != "sql" and pipeline.kind != "python":
        return
    try:
        file, _config = pipeline.loaded()
        if pipeline.kind == "sql":
            calls = static_calls(pipeline.text, file, pipeline.namespace)
            check_direct_names(pipeline.text, file)
        else:
            from ratui.engine.project.python_source import static_calls_python

            calls = static_calls_python(pipeline.text, file, pipeline.namespace)
        pipeline.refs, pipeline.zones, pipeline.ref_lines = calls.refs, calls.zones, calls.lines
        for name in calls.zones:
            check_name(name, "landing zone", str(pipeline.file))
            zone = open_zone(settings, pipeline.namespace, name, file=str(pipeline.file))
            if not zone.polled:  # a folder's files are listed too: one linked in from outside is refused now
                zone.list()  # (a remote zone is listed when a run reads it)
        pipeline.test_refs = []
        for test in pipeline.tests:
            if not test.error:
                test_calls = static_calls(test.text, test.file, pipeline.namespace)
                check_direct_names(test.text, test.file)
                for name in test_calls.zones:
                    check_name(name, "landing zone", str(test.file))
                    open_zone(settings, pipeline.namespace, name, file=str(test.file))
                pipeline.test_refs.extend((key, test.file, test_calls.lines.get(key)) for key in test_calls.refs)
    except RatuiError as exc:
        pipeline.errors.append(exc)


def compile_project(root: Path, settings: Settings | None = None) -> CompiledProject:
    settings = settings or load_settings(root)
    found = discover(settings.root, settings.locations())
    for pipeline in found.pipelines:
        compile_pipeline(pipeline, settings)
    graph = build_graph(found.pipelines)
    known = {p.key for p in found.pipelines}
    for pipeline in found.pipelines:
        for key, test_file, line in pipeline.test_refs:
            if key not in known:
                pipeline.errors.append(RatuiError(
                    "RAT-DAG-002", f"quality test {test_file.name} of {pipeline.key} refs '{key}', which no pipeline "
                    "produces", file=str(test_file), line=line,
                    hint=did_you_mean(key, known) if known else None))
    return CompiledProject(settings, {p.key: p for p in found.pipelines}, graph, found.errors)
