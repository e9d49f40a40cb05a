"""The black-box corpus of bad inputs, run through the installed `ratui` command (see cases.py, conftest.py).

Every case asserts the exit code, the coded error with the file (a project-relative suffix) and line it names,
that no traceback or JVM text reaches stdout or stderr, and that main's tables are unchanged (except the table a
case expects its own successful run to change). Compile-time cases each run on their own copy of the base state;
runtime cases share one `ratui run` per batch (cases.BATCHES: "main", no selector; "selected", its cases' pipelines
with --full-refresh and lenient landing settings); the two moved-project cases build on the batches. A case's
`spec` says whether its behaviour worked when it was written ("today") or was being built ("building").

Categories (cases):

    annotations           14
    config.yaml            9
    ratui.yaml            37
    catalog               13
    templates              9
    SQL                   18
    names                 10
    landing files         36
    landing ledger         5
    schema changes         8
    quality tests          9
    data diff gates        1
    path escapes          13
    moved projects         2
    unreadable files      13
    CLI misuse            45
    column lineage         7
    compile gate           3
    compile cache          3
    Python pipelines      15
    REST catalog          16
    Python API            27
    time ranges            6
    total                319

Select or skip the corpus with `-m corpus` / `-m "not corpus"`; `-m "corpus and not corpus_jvm"` leaves out the
cases that need Spark beyond the base state's one run (the fast loop while editing compile-time cases).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from .cases import BATCHES, CASES, Case
from .conftest import (
    BaseState, BatchResult, Jobs, apply_case, case_argv, error_matches, fingerprint, foreign_text, parse_errors,
    ratui_binary, run_api, run_cli, runs_count,
)

pytestmark = pytest.mark.corpus


def _expected_exit(case: Case) -> tuple[int, ...]:
    return case.expect_exit if isinstance(case.expect_exit, tuple) else (case.expect_exit,)


def _sorted_rows(rows) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def _fail(case: Case, problems: list[str], *context: str) -> None:
    if problems:
        pytest.fail(f"[{case.spec}] {case.id}:\n  - " + "\n  - ".join(problems) + "\n\n" + "\n\n".join(context),
                    pytrace=False)


def _param(case: Case):
    jvm = case.batch is not None or case.scenario == "moved"
    return pytest.param(case, id=case.id, marks=[pytest.mark.corpus_jvm] if jvm else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case: Case, corpus_base: BaseState, corpus_jobs: Jobs, tmp_path: Path, request):
    if case.scenario == "moved":
        check_moved(case, corpus_jobs.get("scenario:moved"), corpus_base)
    elif case.scenario == "closed_pipe":
        check_closed_pipe(case, corpus_base, tmp_path)
    elif case.scenario == "rest":
        check_rest(case, request.getfixturevalue("corpus_rest"))
    elif case.batch:
        check_runtime(case, corpus_jobs.get(case.batch))
    else:
        check_compile_time(case, corpus_base, tmp_path)


# ------------------------------------------------------------------------------------------------ compile time


def _check_errors(case: Case, errors: list[dict], problems: list[str]) -> None:
    if not any(error_matches(e, case.expect_code, case.expect_file, case.expect_line) for e in errors):
        got = [{k: e.get(k) for k in ("code", "file", "line", "text") if e.get(k) is not None} for e in errors]
        problems.append(f"expected {case.expect_code} at {case.expect_file}:{case.expect_line}, "
                        f"got {got or 'no error'}")
    for code, file in case.also:
        if not any(error_matches(e, code, file, None) for e in errors):
            problems.append(f"expected {code} at {file} too")
    for e in errors:
        if e["source"] == "text" and not e.get("hint"):
            problems.append(f"error[{e['code']}] is not followed by a '  hint: ...' line")


def check_compile_time(case: Case, base: BaseState, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(base.root, root, symlinks=True)
    outside, empty = tmp_path / "outside", tmp_path / "empty"
    outside.mkdir()
    empty.mkdir()
    apply_case(case, root, outside)
    proc = run_api(case, root, empty) if case.api else run_cli(case_argv(case, root, outside, empty))
    problems: list[str] = []
    errors = parse_errors(proc)
    if case.expect_code:
        _check_errors(case, errors, problems)
    elif errors:
        problems.append(f"expected no error, got {[(e.get('code'), e.get('file') or e.get('text')) for e in errors]}")
    if proc.rc not in _expected_exit(case):
        problems.append(f"exit {proc.rc}, expected {case.expect_exit}")
    foreign = foreign_text(proc.out, proc.err)
    if foreign:
        problems.append(f"traceback/JVM text on the terminal: {foreign[:3]}")
    problems += [f"{secret!r} was shown" for secret in case.never_shown if secret in proc.out + proc.err]
    if case.fingerprint:
        if fingerprint(root) != base.fingerprint:
            problems.append("main's tables changed")
        if runs_count(root) != base.runs:
            problems.append(f"runs were recorded ({runs_count(root) - base.runs} new)")
    _fail(case, problems, proc.show())


# ------------------------------------------------------------------------------------------------ runtime batches


def _note_holds(note: str, part: str) -> bool:
    return bool(re.search(part[3:], note)) if part.startswith("re:") else part in note


def check_runtime(case: Case, res: BatchResult) -> None:
    if res.problem:
        pytest.fail(f"{case.id}: {res.problem}", pytrace=False)
    batch = BATCHES[case.batch]
    run = res.run
    context = [s.show() for s in res.steps]
    problems: list[str] = []
    # shared: the batch's exit code, a clean terminal, main unchanged except by the batch's successful runs
    if run.rc != batch.expect_exit:
        problems.append(f"batch '{batch.id}' exited {run.rc}, expected {batch.expect_exit}")
    for step in res.steps[:-1]:
        if step.rc != 0:
            problems.append(f"step `ratui {' '.join(step.argv[:4])}` exited {step.rc}")
    foreign = foreign_text(*(s.out for s in res.steps), *(s.err for s in res.steps))
    if foreign:
        problems.append(f"traceback/JVM text on the terminal: {foreign[:3]}")
    others = {c.pipeline for c in res.cases if c is not case and c.pipeline and c.pipeline != case.pipeline}
    for key in sorted(set(res.before) | set(res.after)):
        if key in others or (key == case.pipeline and case.expect_status == "success"):
            continue
        if res.before.get(key) != res.after.get(key):
            problems.append(f"main's table {key} changed: {res.before.get(key)} -> {res.after.get(key)}")

    result = res.results.get(case.pipeline) if case.pipeline else {"status": case.expect_status}
    if case.pipeline is None and not res.results:
        problems.append("the batch ran nothing")
    if result is None:
        compile_errors = [(e.get("code"), e.get("file") or e.get("text")) for e in parse_errors(run)]
        problems.append(f"no run result for {case.pipeline}" + (f"; compile errors: {compile_errors}"
                                                                  if compile_errors else ""))
    else:
        if result.get("status") != case.expect_status:
            problems.append(f"status {result.get('status')}, expected {case.expect_status}; "
                            f"error {result.get('error')}")
        if case.expect_code:
            error = dict(result.get("error") or {}, source="json")
            if not error_matches(error, case.expect_code, case.expect_file, case.expect_line):
                got = {k: error.get(k) for k in ("code", "file", "line", "message")}
                problems.append(f"expected {case.expect_code} at {case.expect_file}:{case.expect_line}, got {got}")
        if case.expect_notes:
            head, *rest = case.expect_notes
            notes = result.get("notes") or []
            if not any(str(n).startswith(head) and all(_note_holds(str(n), p) for p in rest) for n in notes):
                problems.append(f"expected a note starting {head!r} naming {rest}, notes: {notes}")
        if case.expect_warnings is not None and result.get("warnings") != case.expect_warnings:
            problems.append(f"warnings {result.get('warnings')}, expected {case.expect_warnings}")
    if case.expect_rows is not None or case.expect_row_count is not None:
        rows = res.rows.get(case.pipeline)
        if isinstance(rows, str):
            problems.append(rows)
        elif rows is None:
            problems.append(f"no table {case.pipeline} on main")
        elif case.expect_rows is not None and _sorted_rows(rows) != _sorted_rows(case.expect_rows):
            problems.append(f"rows on main: {rows}, expected {list(case.expect_rows)}")
        elif case.expect_row_count is not None and len(rows) != case.expect_row_count:
            problems.append(f"{len(rows)} rows on main, expected {case.expect_row_count}")
    if case.expect_stderr:
        if not any(all(s in line for s in case.expect_stderr) for line in run.err.splitlines()):
            problems.append(f"stderr has no line with {case.expect_stderr}")
    _fail(case, problems, *context)


# ------------------------------------------------------------------------------------------------ scenarios


def check_moved(case: Case, obs: dict, base: BaseState) -> None:
    if obs.get("problem"):
        pytest.fail(f"{case.id}: {obs['problem']}", pytrace=False)
    problems: list[str] = []
    procs = [obs["first"].run, obs["run_second"]]
    foreign = foreign_text(*(p.out for p in procs), *(p.err for p in procs))
    if foreign:
        problems.append(f"traceback/JVM text on the terminal: {foreign[:3]}")
    if case.id == "moved-copy-reads-and-writes-only-itself":
        succeeded = [k for k, r in obs["first"].results.items() if r.get("status") == "success"]
        if not succeeded:
            problems.append("no run succeeded in the copy")
        after = obs["base_warehouse_after"]
        added = sorted(set(after) - set(base.warehouse))
        changed = sorted(k for k in set(after) & set(base.warehouse) if after[k] != base.warehouse[k])
        removed = sorted(set(base.warehouse) - set(after))
        if added or changed or removed:
            problems.append(f"the original's warehouse changed: {len(added)} file(s) added (e.g. {added[:2]}), "
                            f"{len(changed)} changed, {len(removed)} removed")
    else:
        before = obs["first"].after
        if obs["fingerprint_second"] != before:
            problems.append("main's tables read in the second copy differ from the first copy's")
        run = obs["run_second"]
        runs = [json.loads(line) for line in run.out.splitlines() if line.startswith("{")]
        statuses = {r.get("pipeline"): r.get("status") for r in runs}
        if run.rc != 0 or statuses != {"shop.gold.revenue": "success", "shop.gold.moved_counts": "success"}:
            problems.append(f"run in the copy of the deleted copy: exit {run.rc}, runs {statuses}")
        expected = [{"orders": before["shop.silver.orders"][0], "events": before["shop.bronze.raw_events"][0],
                     "products": before["shop.bronze.raw_products"][0]}]
        if obs["counts_second"] != expected:
            problems.append(f"the query of three tables answered {obs['counts_second']}, expected {expected}")
    _fail(case, problems, *(p.show() for p in procs))


def check_closed_pipe(case: Case, base: BaseState, tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(base.root, root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    apply_case(case, root, outside)
    argv = case_argv(case, root, outside, tmp_path)
    proc = subprocess.Popen([ratui_binary(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    first = proc.stdout.readline()
    proc.stdout.close()  # `| head -1`: the reader goes away
    try:
        err = proc.stderr.read().decode(errors="replace")
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    problems: list[str] = []
    try:
        json.loads(first)
    except ValueError:
        problems.append(f"the first line is not JSON: {first[:200]!r}")
    bad = foreign_text(err) + [line for line in err.splitlines()
                               if "BrokenPipeError" in line or "Exception ignored" in line]
    if bad:
        problems.append(f"stderr after the pipe closed: {bad[:3]}")
    if rc not in _expected_exit(case):
        problems.append(f"exit {rc}, expected one of {case.expect_exit}")
    _fail(case, problems, f"stderr:\n{err[-3000:]}")


def check_rest(case: Case, rest) -> None:
    """One bad request to `ratui serve` (tests/rest/): the status, the Iceberg REST error shape (checked against our
    statement of the error model, tests/rest/openapi.py) with the case's ratui code, no traceback, and main and the
    branch exactly as they were."""
    server, catalog = rest
    method, ref, path, body = case.rest
    before = {name: (c.hash, c.pointers) for name in ("main", "dev") for c in [catalog.commit(name)]}
    sent = {"data": body} if isinstance(body, bytes) else ({"json": body} if body is not None else {})
    response = server.request(method, ref, path, **sent)  # checks the body's shape (openapi.py), and "RAT-" first
    problems: list[str] = []
    if response.status_code != case.expect_http:
        problems.append(f"HTTP {response.status_code}, expected {case.expect_http}")
    error = (response.json() or {}).get("error", {}) if response.content else {}
    if not str(error.get("message", "")).startswith(f"{case.expect_code}: "):
        problems.append(f"expected {case.expect_code}, got {error}")
    if error.get("code") != response.status_code:
        problems.append(f"the error's code {error.get('code')} is not the HTTP status")
    after = {name: (c.hash, c.pointers) for name in ("main", "dev") for c in [catalog.commit(name)]}
    if after != before:
        problems.append(f"a ref changed: {sorted(k for k in after if after[k] != before[k])}")
    _fail(case, problems, f"{method} {ref} {path[:200]} -> {response.status_code} {response.text[:1000]}")


# ------------------------------------------------------------------------------------------------ the corpus itself


def test_docstring_counts_are_true():
    counts = Counter(c.category for c in CASES)
    table = dict(re.findall(r"^    (\S.*?)\s{2,}(\d+)$", __doc__, re.M))
    assert {k: int(v) for k, v in table.items() if k != "total"} == dict(counts)
    assert int(table["total"]) == len(CASES)


def test_every_runtime_case_owns_its_pipeline():
    owners: dict[str, str] = {}
    for case in CASES:
        if case.batch and case.pipeline and case.expect_status != "success":
            assert owners.setdefault(f"{case.batch}:{case.pipeline}", case.id) == case.id, case.id
