"""The quality gate of a merge by append: each appended table's quality tests, run again on the combined rows.

A merge by append (ops/branches.py, state/catalog/append_merge.py) puts rows on the target that no run tested
together: the branch's run tested the branch's rows on top of the fork, the target's runs theirs. So before the
merge lands, the tables' own quality tests (tests/quality/*.sql of the pipeline that makes the table) run on the
temporary branch holding the combined state, never on the target, exactly as a run's quality phase does on its
branch (`{{ this }}` and `ref()` read that branch). An error-severity test that fails (or cannot run) refuses the
merge: RAT-CAT-013 naming it, nothing reached the target. Warn-severity findings are logged and let it through.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from typing import Callable

from ratui.engine.errors import RatuiError
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.run.quality import QualityOutcome, TestsNotRun, run_tests
from ratui.engine.run.scope import DebugLog
from ratui.engine.run.sources import RunSources
from ratui.engine.spark import jobs as spark_jobs
from ratui.engine.state.project_state import ProjectState
from ratui.engine.vocabulary import now_iso

log = logging.getLogger("ratui.engine")


def quality_gate(state: ProjectState, compile_project: Callable[[], CompiledProject], into: str,
                 source: str) -> Callable[[str, list[str]], None]:
    """The `verify` of ops/branches.merge: runs the tests of `tables` on `ref` (the temporary branch)."""

    def verify(ref: str, tables: list[str]) -> None:
        outcomes = check(state, compile_project(), ref, tables, into)
        blocking = [(key, q) for key, q in outcomes if q.blocks_merge]
        for key, q in outcomes:
            if q.status == "warned":
                log.warning("merge of %s: quality %s of %s warned (%d rows) on the combined rows", source, q.test,
                            key, q.violations)
        if blocking:
            names = ", ".join(f"{key}: {q.test} ({q.violations} rows)" if q.status == "failed" else
                              f"{key}: {q.test} (error: {q.error})" for key, q in blocking)
            key, first = blocking[0]
            raise RatuiError("RAT-CAT-013", f"cannot merge '{source}' into '{into}': the combined rows fail "
                             f"quality: {names}", file=first.file, line=first.line,
                             details={"tables": sorted({k for k, _ in blocking}),
                                      "quality": [{"table": k, **q.to_dict()} for k, q in blocking]})

    return verify


def check(state: ProjectState, compiled: CompiledProject, ref: str, tables: list[str],
          into: str) -> list[tuple[str, QualityOutcome]]:
    """Every quality test of every table in `tables` (that a pipeline of the project makes), run on `ref`."""
    todo = [(key, compiled.pipelines[key]) for key in tables
            if key in compiled.pipelines and compiled.pipelines[key].tests]
    if not todo:
        return []
    settings = state.settings
    tag = f"merge-{uuid.uuid4().hex[:12]}"
    session = spark_jobs.new_run_session(settings, tag)
    staging = settings.state_dir / "staging" / tag
    out: list[tuple[str, QualityOutcome]] = []
    try:
        for key, pipeline in todo:
            file, config = pipeline.loaded()
            sources = RunSources(state, session, key=key, branch=ref, pipeline=pipeline,
                                 strategy=config.merge_strategy, full_refresh=False, run_started_at=now_iso(),
                                 staging=staging, log=DebugLog("ratui.engine"), target=into)
            try:
                context = sources.context(pipeline, file)
                context.this = sources.table(key)
                out.extend((key, q) for q in run_tests(session, pipeline.tests, context,
                                                       settings.quality_sample_rows))
            except TestsNotRun as stopped:  # Spark could not run them: its error, never a verdict on the rows
                raise stopped.error from stopped
            finally:
                sources.drop_views()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out
