"""Fixtures of the bad-input corpus: the base state, the CLI runner, main's fingerprint and the runtime batches.

Every command runs the INSTALLED `ratui` (the script beside this interpreter) in a subprocess. The base template
(tests/corpus/base/) is materialized once per session and run once (`ratui run`, one JVM): that is the base state.
Compile-time cases copy it and run a command that stops before Spark. Runtime cases are batched (cases.BATCHES):
all cases of a batch are applied to one copy and served by one `ratui` invocation. The batches (and the moved-
project scenario) start in background threads as soon as the base state exists, so their JVMs work while the
cheap compile-time cases run in the foreground; a runtime test waits for its batch. Each batch's full output
is kept beside its project as batch-{id}.log (in the session's corpus-jobs tmp folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from .cases import BASE_GENERATED, BATCHES, CASES, Batch, Case

TEMPLATE = Path(__file__).resolve().parent / "base"
RUN_TIMEOUT = 420  # one `ratui run` that reaches Spark, on a busy 2-core machine
CLI_TIMEOUT = 60  # a command that stops before Spark
JVM_LANES = 2  # batches running at once (each is one JVM)

FOREIGN = ("Traceback", "Exception in thread", "at org.apache", "py4j", "log4j", "SLF4J", " WARN ", "WARNING:")
_FOREIGN_CI = {"py4j"}  # matched case-insensitively (Py4JJavaError is JVM text too)

TIMINGS: dict[str, float] = {}  # what the session's JVM work took, printed in the terminal summary


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "corpus: seconds per ratui invocation that starts Spark")
        for name, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{name:<40} {seconds:7.1f}")


def pytest_collection_modifyitems(session, config, items):
    """Within the corpus, the cases served by background JVM jobs go last: the cheap cases run while they work,
    instead of the first runtime case blocking the foreground until its batch is done."""
    here = Path(__file__).resolve().parent
    positions = [i for i, item in enumerate(items) if here in Path(str(item.fspath)).resolve().parents]
    corpus = [items[i] for i in positions]
    reordered = [i for i in corpus if not i.get_closest_marker("corpus_jvm")] + \
                [i for i in corpus if i.get_closest_marker("corpus_jvm")]
    for position, item in zip(positions, reordered):
        items[position] = item


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: the black-box corpus of bad inputs (tests/corpus/)")
    config.addinivalue_line("markers", "corpus_jvm: corpus cases served by a runtime batch or scenario (Spark)")


def ratui_binary() -> str:
    """The script installed beside this interpreter first: the install under test, even if another is on PATH."""
    beside = Path(sys.executable).parent / "ratui"
    found = str(beside) if beside.exists() else shutil.which("ratui")
    assert found, "the ratui command is not installed"
    return found


# ------------------------------------------------------------------------------------------------ the CLI


@dataclass
class Proc:
    argv: list[str]
    rc: int
    out: str
    err: str
    seconds: float

    def show(self, limit: int = 4000) -> str:
        return (f"$ ratui {' '.join(self.argv)}\n-> exit {self.rc} in {self.seconds:.1f}s\n"
                f"--- stdout\n{self.out[-limit:]}\n--- stderr\n{self.err[-limit:]}")


def _group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process of the process group is left, e.g. a JVM still shutting down."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
    for stat in proc_dir.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def run_cli(argv: list[str], timeout: float = CLI_TIMEOUT, cwd: Path | None = None) -> Proc:
    """Run the installed ratui in a session of its own; kill that process group (ours) on timeout.

    Returns once the whole group is gone: the JVM of a run outlives the Python process for a moment while it
    cleans up, and a test that copies or deletes the project must not race it.
    """
    began = time.monotonic()
    proc = subprocess.Popen([ratui_binary(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", cwd=cwd, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc, err = -9, err + f"\n[corpus] killed after {timeout}s"
    deadline = time.monotonic() + 60
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
    return Proc(argv, rc, out, err, time.monotonic() - began)


API_RUNNER = """\
import json, sys
import ratui
root, code = sys.argv[1], sys.argv[2]
try:
    p = None if "ratui.open(" in code else ratui.open(root)
    exec(code, {"ratui": ratui, "p": p})
except ratui.RatuiError as exc:
    print(json.dumps({"error": exc.to_dict()}))
    sys.exit(2)
"""


def run_api(case: Case, root: Path, empty: Path, timeout: float = CLI_TIMEOUT) -> Proc:
    """A Python API case: its code in a fresh interpreter (this one, so the ratui under test), `p` open on the
    project; a coded error is printed as `--json` prints one, with exit 2."""
    code = case.api.replace("{empty}", str(empty)).replace("{root}", str(root))
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", API_RUNNER, str(root), code], capture_output=True, text=True,
                          errors="replace", timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return Proc(["python", "-c", code], proc.returncode, proc.stdout, proc.stderr, time.monotonic() - began)


def foreign_text(*texts: str) -> list[str]:
    """Lines of JVM or Python-internal text (tracebacks, log4j, py4j...) that must never reach the user."""
    bad = []
    for text in texts:
        for line in text.splitlines():
            if any(w in line for w in FOREIGN if w not in _FOREIGN_CI) or \
                    any(w in line.lower() for w in _FOREIGN_CI):
                bad.append(line)
    return bad


ERROR_LINE = re.compile(r"^error\[(RAT-[A-Z]+-\d+)\] (.*)$")


def parse_errors(proc: Proc) -> list[dict[str, Any]]:
    """Coded errors the command reported: JSON ({"error":..} lines, check's {"errors": [..]}) or text lines."""
    found: list[dict[str, Any]] = []
    for line in proc.out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj.get("error"), dict) and "pipeline" not in obj:
            found.append(dict(obj["error"], source="json"))
        for e in obj.get("errors") or []:
            found.append(dict(e, source="json"))
    for stream in (proc.err, proc.out):
        lines = stream.splitlines()
        for i, line in enumerate(lines):
            m = ERROR_LINE.match(line)
            if m:
                hint = lines[i + 1].strip() if i + 1 < len(lines) else ""
                found.append({"code": m.group(1), "text": m.group(2), "source": "text",
                              "hint": hint[len("hint:"):].strip() if hint.startswith("hint:") else None})
    return found


def error_matches(error: dict[str, Any], code: str, file: str | None, line: int | None) -> bool:
    if not (error.get("code") == code or (code.endswith("-") and str(error.get("code", "")).startswith(code))):
        return False
    if error["source"] == "json":
        if file is not None and not str(error.get("file") or "").endswith(file):
            return False
        if line is not None and error.get("line") != line:
            return False
        return True
    text = error["text"]
    if file is None:
        return True
    return f"{file}:{line}: " in text if line is not None else (f"{file}: " in text or f"{file}:" in text)


# ------------------------------------------------------------------------------------------------ project state


def materialize(dest: Path) -> Path:
    shutil.copytree(TEMPLATE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, content in BASE_GENERATED.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return dest


def _canonical(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else str(value) if not isinstance(
        value, (int, float, str, bool, type(None), list, dict)) else value


def table_rows(root: Path, key: str) -> list[dict[str, Any]] | None:
    """The rows of a table on main, read with PyIceberg in this process (no Spark); None if it does not exist."""
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    catalog = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    if key not in catalog.table_pointers("main"):
        return None
    rows = catalog.load_table("main", key).scan().to_arrow().to_pylist()
    return [{k: _canonical(v) for k, v in row.items()} for row in rows]


def _rows_digest(rows: list[dict[str, Any]]) -> tuple[int, str]:
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def fingerprint(root: Path) -> dict[str, tuple[int, str]]:
    """Every table on main: {table_key: (row_count, sha256 of its rows sorted)} (column names are in the rows)."""
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    catalog = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    out = {}
    for key in sorted(catalog.table_pointers("main")):
        rows = catalog.load_table("main", key).scan().to_arrow().to_pylist()
        out[key] = _rows_digest([{k: _canonical(v) for k, v in r.items()} for r in rows])
    return out


def runs_count(root: Path) -> int:
    conn = sqlite3.connect(f"file:{root / '.ratui' / 'ratui.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        conn.close()


def tree_snapshot(root: Path, pattern: str = "*/warehouse") -> dict[str, tuple[str, int]]:
    """{relpath: (sha256, mtime_ns)} of every file under root's warehouse folders."""
    out = {}
    for folder in root.glob(pattern):
        for path in folder.rglob("*"):
            if path.is_file():
                out[str(path.relative_to(root))] = (hashlib.sha256(path.read_bytes()).hexdigest(),
                                                    path.stat().st_mtime_ns)
    return out


def _sub(text: str, root: Path, outside: Path) -> str:
    return text.replace("{outside}", str(outside)).replace("{root}", str(root))


def apply_case(case: Case, root: Path, outside: Path) -> None:
    for rel, content in case.outside.items():
        path = outside / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(_sub(content, root, outside))
    for rel in case.delete:
        path = root / rel
        assert path.exists() or path.is_symlink(), f"{case.id}: nothing to delete at {rel}"
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    for rel, content in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(_sub(content, root, outside))
    for rel, target in case.symlinks.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        os.symlink(_sub(target, root, outside), path)
    if case.prepare is not None:
        case.prepare(root, outside)


def case_argv(case: Case, root: Path, outside: Path, empty: Path) -> list[str]:
    argv = [a.replace("{root}", str(root)).replace("{outside}", str(outside)).replace("{empty}", str(empty))
            for a in case.argv]
    if "--project" not in argv:
        argv += ["--project", str(root)]
    return argv


# ------------------------------------------------------------------------------------------------ the base state


@dataclass
class BaseState:
    root: Path
    fingerprint: dict[str, tuple[int, str]]
    runs: int
    warehouse: dict[str, tuple[str, int]]  # snapshot taken right after the base run
    proc: Proc


@dataclass
class BatchResult:
    batch: Batch
    root: Path
    cases: list[Case]
    steps: list[Proc] = field(default_factory=list)  # the `before` steps, then the run
    before: dict[str, tuple[int, str]] = field(default_factory=dict)
    after: dict[str, tuple[int, str]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # pipeline key -> its run (JSON or parsed text)
    rows: dict[str, Any] = field(default_factory=dict)  # table key -> its rows on main after the run (or why not)
    problem: str | None = None  # the harness could not set the batch up

    @property
    def run(self) -> Proc:
        return self.steps[-1]


def parse_results(proc: Proc) -> dict[str, dict[str, Any]]:
    """`ratui run --json`: one object per run, by pipeline key."""
    results: dict[str, dict[str, Any]] = {}
    for line in proc.out.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "pipeline" in obj:
            results[obj["pipeline"]] = obj
    return results


class Jobs:
    """The runtime batches and scenarios, started in background threads once the base state exists."""

    def __init__(self, base: BaseState, workdir: Path):
        self.base = base
        self.workdir = workdir
        self.pool = ThreadPoolExecutor(max_workers=JVM_LANES, thread_name_prefix="corpus-jvm")
        self.futures: dict[str, Future] = {}
        self.lock = threading.Lock()

    def start(self, name: str) -> None:
        if name == "scenario:moved":
            self.start("main")  # submitted first: the scenario waits for them, and FIFO lanes cannot deadlock
            self.start("selected")
        with self.lock:
            if name in self.futures:
                return
            fn = self._moved if name == "scenario:moved" else lambda: self._batch(name)
            self.futures[name] = self.pool.submit(fn)

    def get(self, name: str) -> Any:
        self.start(name)
        return self.futures[name].result()

    def copy_base(self, name: str) -> Path:
        dest = self.workdir / name
        shutil.copytree(self.base.root, dest, symlinks=True)
        return dest

    def _batch(self, batch_id: str) -> BatchResult:
        batch = BATCHES[batch_id]
        cases = [c for c in CASES if c.batch == batch_id]
        root = self.copy_base(f"batch-{batch_id}")
        outside = self.workdir / f"outside-{batch_id}"
        outside.mkdir()
        result = BatchResult(batch, root, cases)
        try:
            for case in cases:
                apply_case(case, root, outside)
            if batch.settings is not None:
                (root / "ratui.yaml").write_text(_sub(batch.settings, root, outside))
            result.before = fingerprint(root)
        except Exception as exc:  # reported by every test of the batch
            result.problem = f"setting up batch {batch_id} failed: {type(exc).__name__}: {exc}"
            return result
        for step in batch.before:
            result.steps.append(run_cli([*step, "--project", str(root)]))
        selectors = sorted({c.pipeline for c in cases if c.pipeline}) if batch.select else []
        result.steps.append(run_cli([*batch.argv, *selectors, "--project", str(root)], timeout=RUN_TIMEOUT))
        TIMINGS[f"batch {batch_id} ({len(cases)} cases)"] = result.run.seconds
        result.results = parse_results(result.run)
        (self.workdir / f"batch-{batch_id}.log").write_text("\n\n".join(p.show(limit=10**7) for p in result.steps))
        try:
            result.after = fingerprint(root)
        except Exception as exc:
            result.problem = f"main's fingerprint after batch {batch_id} failed: {type(exc).__name__}: {exc}"
        for case in cases:  # read now: the moved-project scenario takes the selected batch's project away
            if case.expect_rows is not None or case.expect_row_count is not None:
                try:
                    result.rows[case.pipeline] = table_rows(root, case.pipeline)
                except Exception as exc:
                    result.rows[case.pipeline] = f"cannot read {case.pipeline}: {type(exc).__name__}: {exc}"
        return result

    def _moved(self) -> dict[str, Any]:
        """A project copied after runs, then the copy copied and the first copy deleted.

        The first copy is the selected batch's project: a copy of the base state (which ran in place) that ran
        there. Once it and the main batch are done, the base's warehouse must be as the base run left it. Then the
        selected project is copied and deleted, and the second copy must read every table back and run (a rewrite
        of gold.revenue and a new pipeline querying three tables, in one JVM).
        """
        obs: dict[str, Any] = {}
        try:
            self._moved_steps(obs)
        except Exception as exc:  # reported by both tests of the scenario
            obs["problem"] = f"the moved-project scenario failed: {type(exc).__name__}: {exc}"
        return obs

    def _moved_steps(self, obs: dict[str, Any]) -> None:
        first: BatchResult = self.futures["selected"].result()
        if first.problem or not first.after:
            raise RuntimeError(f"the selected batch it builds on did not run: {first.problem}")
        obs["first"] = first
        second = self.workdir / "moved-second"
        shutil.copytree(first.root, second, symlinks=True)
        shutil.rmtree(first.root)
        obs["fingerprint_second"] = fingerprint(second)  # every table read through the catalog, first copy gone
        # one JVM both runs and queries: gold.revenue rewrites an existing table from silver.orders, and a new
        # pipeline counts the rows of three tables whose files the deleted copy (or the base run) wrote
        (second / MOVED_QUERY_FILE).parent.mkdir(parents=True)
        (second / MOVED_QUERY_FILE).write_text(MOVED_QUERY)
        obs["run_second"] = run_cli(["run", "gold.revenue", "gold.moved_counts", "--force", "--json",
                                     "--project", str(second)], timeout=RUN_TIMEOUT)
        TIMINGS["moved: run and query in the second copy"] = obs["run_second"].seconds
        obs["counts_second"] = table_rows(second, "shop.gold.moved_counts")
        self.futures["main"].result()
        obs["base_warehouse_after"] = tree_snapshot(self.base.root)


MOVED_QUERY_FILE = "shop/pipelines/gold/moved_counts/pipeline.sql"
MOVED_QUERY = """\
-- @merge_strategy: full_refresh
SELECT
    (SELECT count(*) FROM {{ ref('silver.orders') }}) AS orders,
    (SELECT count(*) FROM {{ ref('bronze.raw_events') }}) AS events,
    (SELECT count(*) FROM {{ ref('bronze.raw_products') }}) AS products
"""


def _needed_jobs(items) -> list[str]:
    """The batches and scenarios the selected tests need, longest first."""
    from .cases import CASES_BY_ID

    names: list[str] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        case = CASES_BY_ID.get(callspec.id) if callspec else None
        if case is None or "corpus" not in str(item.fspath):
            continue
        name = f"batch:{case.batch}" if case.batch else ("scenario:moved" if case.scenario == "moved" else None)
        if name and name not in names:
            names.append(name)
    order = ["batch:main", "batch:selected", "scenario:moved"]  # moved builds on selected
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


@pytest.fixture(scope="session")
def corpus_base(tmp_path_factory) -> BaseState:
    """The template after one successful `ratui run`.

    RATUI_CORPUS_BASE=DIR (a development aid) keeps the base state in DIR and reuses it while DIR exists: delete
    DIR after changing the template.
    """
    keep = os.environ.get("RATUI_CORPUS_BASE")
    if keep and (Path(keep) / ".ratui" / "ratui.db").exists():
        root = Path(keep)
        return BaseState(root, fingerprint(root), runs_count(root), tree_snapshot(root), Proc([], 0, "", "", 0.0))
    root = materialize(Path(keep) if keep else tmp_path_factory.mktemp("corpus") / "base")
    proc = run_cli(["run", "--json", "--project", str(root)], timeout=RUN_TIMEOUT)
    TIMINGS["base state"] = proc.seconds
    assert proc.rc == 0, "the base state must build cleanly\n" + proc.show()
    failed = [json.loads(line) for line in proc.out.splitlines() if line.startswith("{")]
    failed = [r for r in failed if r.get("status") != "success"]
    assert not failed, f"base runs that did not succeed: {failed}"
    return BaseState(root, fingerprint(root), runs_count(root), tree_snapshot(root), proc)


@pytest.fixture(scope="session")
def corpus_jobs(corpus_base, tmp_path_factory, request) -> Iterator[Jobs]:
    jobs = Jobs(corpus_base, tmp_path_factory.mktemp("corpus-jobs"))
    for name in _needed_jobs(request.session.items):
        jobs.start(name.replace("batch:", ""))
    yield jobs
    jobs.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(autouse=True)
def _start_jobs_early(request):
    """The first corpus test starts every runtime job it will need, so the JVMs work during the cheap cases."""
    if "case" in getattr(request, "fixturenames", ()):
        request.getfixturevalue("corpus_jobs")
    yield


@pytest.fixture(scope="session")
def corpus_rest(corpus_base, tmp_path_factory) -> Iterator[Any]:
    """`ratui serve` on a copy of the base state with a branch "dev", for the REST catalog's cases (scenario "rest"):
    (the server, the copy's branch catalog)."""
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog
    from tests.rest.conftest import serve

    root = tmp_path_factory.mktemp("corpus-rest") / "project"
    shutil.copytree(corpus_base.root, root, symlinks=True)
    catalog = SqliteBranchCatalog(root / ".ratui" / "ratui.db", root)
    catalog.create_branch("dev")
    with serve(root) as server:
        yield server, catalog
