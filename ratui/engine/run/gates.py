"""Phase 4 of a run (quality): what stands between the branch and the merge.

    check_quality   the pipeline's quality tests on the branch's new data; an error-severity failure is
                    RAT-RUN-003, a warning is logged and counted; tests Spark could not run (Spark gone, a class
                    missing there) are recorded `not_run` and the run fails with Spark's own error, never a
                    quality verdict
    diff_of         the run's data diff against the table as the branch forked (data_diff.py)
    judge_diff      the diff's gates (max_row_change, max_rows_removed, max_null_increase): RAT-RUN-009 at the line
                    the gate was written, the diff kept with the run either way

Each outcome is written to the run's record and told to observers as it comes.
"""

from __future__ import annotations

from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.events import QualityResultEvent
from ratui.engine.project.discovery import Pipeline
from ratui.engine.run import data_diff
from ratui.engine.run.control import Cancelled
from ratui.engine.run.failure import first_line
from ratui.engine.run.quality import QualityOutcome, TestsNotRun, not_run, run_tests
from ratui.engine.run.scope import RunScope
from ratui.engine.run.sources import RunSources
from ratui.engine.spark import errors as spark_errors

DIFF_GATES = ("max_row_change", "max_rows_removed", "max_null_increase")


def check_quality(scope: RunScope, session: Any, sources: RunSources, pipeline: Pipeline,
                  outcomes: list[QualityOutcome]) -> None:
    """Run the tests, adding each outcome to `outcomes` (the run's) as it is recorded; RAT-RUN-003 when one blocks
    the merge."""
    if not pipeline.tests:
        scope.log.line("no quality tests")
        return
    file, _config = pipeline.loaded()
    stopped: RatuiError | None = None
    try:
        # the tests see the branch's new data: re-register this pipeline's table after the write
        sources.forget(scope.key)
        context = sources.context(pipeline, file)
        context.this = sources.table(scope.key)
        results = run_tests(session, pipeline.tests, context, scope.settings.quality_sample_rows,
                            check=scope.control.check)
    except TestsNotRun as stop:
        results, stopped = stop.outcomes, stop.error
    except Exception as exc:  # Spark gone (or lacking a class) before the first test: none of them ran
        stopped = None if isinstance(exc, RatuiError) or spark_errors.is_cancellation(exc) \
            else spark_errors.spark_side_failure(exc)
        if stopped is None:
            raise
        results = not_run(pipeline.tests, stopped)
    for outcome in results:
        outcomes.append(outcome)
        scope.record.add_quality(scope.run_id, outcome.to_dict())
        scope.bus.emit(QualityResultEvent(scope.run_id, outcome.test, outcome.severity, outcome.status,
                                          outcome.violations, outcome.duration_ms))
        scope.log.line(f"quality {outcome.test} [{outcome.severity}]: {outcome.status}"
                       + (f", {outcome.violations} violating rows" if outcome.violations else "")
                       + (f" - {outcome.error}" if outcome.error else ""),
                       "info" if outcome.status == "passed" else "warning")
    if stopped is not None:  # Spark could not run the tests: its error is the run's, the data was not judged
        scope.log.line(f"quality tests not run: {stopped.code} {stopped.message}", "warning")
        raise stopped
    blocking = [q for q in outcomes if q.blocks_merge]
    if blocking:
        names = ", ".join(f"{q.test} ({q.violations} rows)" if q.status == "failed" else f"{q.test} (error)"
                          for q in blocking)
        first = blocking[0]
        raise RatuiError("RAT-RUN-003", f"quality gate failed for {scope.key}: {names}"
                         + (f"; {first.test}: {first.error}" if first.status == "error" and first.error else ""),
                         file=str(first.file), line=first.line)


def diff_of(scope: RunScope, session: Any, pipeline: Pipeline, fork_pointers: dict[str, str], *,
            gated: bool) -> data_diff.DataDiff | None:
    """The run's data diff (None when the table is not on the branch). Without gates, a diff that cannot be
    computed is a warning, never the run's failure."""
    catalog = scope.catalog
    if not catalog.table_exists(scope.branch, scope.key):
        return None
    _file, config = pipeline.loaded()
    scope.control.check()
    try:
        after = catalog.load_table(scope.branch, scope.key)
        fork = fork_pointers.get(scope.key)
        before = catalog.static_table(fork) if fork else None
        return data_diff.compute(session, scope.key, before, after, tuple(config.unique_key),
                                 scope.settings.diff_max_rows, scope.settings.diff_in_process_rows)
    except Exception as exc:
        if gated or isinstance(exc, Cancelled) or spark_errors.is_cancellation(exc) \
                or spark_errors.is_unreachable(exc):
            raise
        scope.log.line(f"data diff not computed: {type(exc).__name__}: {first_line(exc)}", "warning")
        return None


def judge_diff(scope: RunScope, diff: data_diff.DataDiff, pipeline: Pipeline, *, gated: bool) -> None:
    """Check the diff's gates (when `gated`), keep the diff with the run and log it; RAT-RUN-009 when a gate
    failed."""
    file, config = pipeline.loaded()
    failed: list[str] = []
    where = _gate_lines(pipeline, config)
    try:
        if gated:
            failed = data_diff.check_gates(diff, config, str(file), {k: v[1] for k, v in where.items()})
    finally:
        scope.record.update(scope.run_id, diff=diff.to_dict())
    scope.log.line(f"data diff: {diff.summary}" + (f"; schema: {', '.join(diff.schema_changes)}"
                                                   if diff.schema_changes else ""))
    for verdict in diff.gate.get("passed", []):
        scope.log.line(f"diff gate passed: {verdict}")
    if failed:
        first = next((k for k in DIFF_GATES if any(f.startswith(k) for f in failed)), "max_row_change")
        gate_file, line = where.get(first, (str(file), None))
        raise RatuiError("RAT-RUN-009", f"data diff gate failed for {scope.key}: {'; '.join(failed)} "
                         f"[{diff.summary}]", file=gate_file, line=line, details={"diff": diff.to_dict()})


def _gate_lines(pipeline: Pipeline, config) -> dict[str, tuple[str, int | None]]:
    """Where each diff gate key was written: (file, line)."""
    from ratui.engine.project.config import parse_annotations
    from ratui.engine.project.schema import read_yaml

    file = pipeline.file
    out: dict[str, tuple[str, int | None]] = {}
    if file is not None and any(config.origin.get(k) == "annotation" for k in DIFF_GATES):
        for ann in parse_annotations(pipeline.text, file):
            if ann.key in DIFF_GATES:
                out[ann.key] = (str(file), ann.line)
    yaml_keys = [k for k in DIFF_GATES if config.origin.get(k) == "config.yaml"]
    if yaml_keys:
        path = pipeline.folder / "config.yaml"
        try:
            doc = read_yaml(path, "RAT-CFG-006")
            out.update({k: (str(path), doc.line((k,))) for k in yaml_keys})
        except RatuiError:
            out.update({k: (str(path), None) for k in yaml_keys})
    return out
