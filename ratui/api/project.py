"""`ratui.open(path)`: a project from Python, over the engine's facade (the same one the CLI and the console use).

    p = ratui.open("path/to/project")          # no Spark, no Textual; dead runs recorded as failed first
    p.pipelines; p.refs(); p.history(limit=20); p.log("main")
    p.table("silver.clean_orders", ref="main").to_arrow()        # PyIceberg, no JVM
    p.sql("SELECT ...", ref="dev").to_pandas()                   # Spark, started on demand
    p.run("silver.clean_orders+")                                # a typed RunResult
    with p.branch("dev-alice") as b: ...                        # see Branch

Spark starts only when a query runs or a pipeline is run; reading tables, refs, history and pipelines never
starts it. Errors are the engine's coded errors (ratui.RatuiError, `.code`, `.hint`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ratui.api import html
from ratui.api.records import (DIFF_COLUMNS, LOG_COLUMNS, PIPELINE_COLUMNS, REF_COLUMNS, RUN_COLUMNS, PipelineInfo,
                               Records, RefInfo, RunRecord)
from ratui.api.runs import RunHandle, RunResult
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from ratui.api.branch import Branch
    from ratui.api.queries import Query
    from ratui.api.tables import Table

TRIGGER = "api"  # how the API's runs are recorded (the history's trigger column)


def _text(value: Any, what: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RatuiError("RAT-API-002", f"{what} must be a non-empty string, got {value!r}")
    return value.strip()


def _selectors(selector: Any) -> list[str]:
    if selector is None:
        return []
    if isinstance(selector, str):
        return selector.split()
    if isinstance(selector, (list, tuple)) and all(isinstance(s, str) for s in selector):
        return [part for s in selector for part in s.split()]
    raise RatuiError("RAT-API-002", f"a selector is a string ('silver.clean_orders+', 'tag:daily') or a list of "
                     f"them, got {selector!r}")


def open(path: str | Path = ".") -> "Project":  # noqa: A001 - ratui.open, like io.open: the API's one entry
    """The project at `path` (the folder holding ratui.yaml, or one below it). Starts neither Spark nor Textual;
    like every ratui command, it first records the runs whose process died (their branches go, main unchanged)."""
    if not isinstance(path, (str, Path)):
        raise RatuiError("RAT-API-002", f"ratui.open() takes a folder path, got {type(path).__name__}")
    from ratui.engine.project.settings import find_project_root
    from ratui.engine.facade.engine import Engine

    folder = Path(path).expanduser()
    try:
        root = find_project_root(folder)
    except RatuiError as exc:
        exc.hint = ("ratui.open() takes the folder holding ratui.yaml (or a folder below it); `ratui init DIR` "
                    "creates a project.")
        raise
    engine = Engine.open(root)
    try:
        engine.recover()
    except BaseException:
        engine.close()
        raise
    return Project(engine)


class Project:
    """An open project (see the module's docstring). A context manager: leaving the block closes it."""

    def __init__(self, engine: Any):
        self._engine = engine
        self._closed = False
        self._lock = threading.Lock()
        self._handles: list[RunHandle] = []
        self._kept: list[Any] = []  # QueryResults behind spark() DataFrames

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def root(self) -> Path:
        return self._engine.root

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release the engine (its SQLite connections and catalog). Runs still going in the background are
        cancelled and waited for first (their branches deleted, main unchanged). Closing twice is harmless."""
        if self._closed:
            return
        for handle in list(self._handles):
            if not handle.done:
                handle.cancel()
                handle._invocation.wait()
        for result in self._kept:
            try:
                result.close()
            except Exception:  # noqa: BLE001 - a session already gone
                pass
        self._kept.clear()
        self._closed = True
        self._engine.close()

    def __enter__(self) -> "Project":
        self._check_open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RatuiError("RAT-API-001", f"the project {self._engine.root} is closed")

    def _engine_state(self):
        return self._engine.state

    def _keep(self, result: Any) -> None:
        self._kept.append(result)

    # ---------------------------------------------------------------------------------------- the project

    @property
    def pipelines(self) -> Records[PipelineInfo]:
        """Every pipeline of the project, compiled now (a pipeline with errors lists them in `.errors`)."""
        self._check_open()
        compiled = self._engine.compile()
        order = [k for k in compiled.graph.order() if k in compiled.pipelines]
        order += sorted(set(compiled.pipelines) - set(order))  # a cycle's pipelines (they carry its error)
        return Records([PipelineInfo.of(compiled.pipelines[k]) for k in order], columns=PIPELINE_COLUMNS,
                       caption=f"pipelines of {self.root.name} (in run order)")

    def select(self, selector: str | Sequence[str]) -> list[str]:
        """The table keys a selector picks, in run order (the selectors of `ratui run`)."""
        self._check_open()
        return self._engine.compile().select(_selectors(selector))

    def refs(self) -> Records[RefInfo]:
        """main, the users' branches, and the branches of runs in flight."""
        self._check_open()
        return Records([RefInfo.of(r) for r in self._engine.refs()], columns=REF_COLUMNS, caption="refs")

    def history(self, limit: int = 20, *, pipeline: str | None = None, status: str | None = None,
                ref: str | None = None) -> Records[RunRecord]:
        """The newest runs (of every process), newest first; `pipeline` takes a key, layer.name or name."""
        self._check_open()
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise RatuiError("RAT-API-002", f"limit must be a whole number of 1 or more, got {limit!r}")
        if pipeline is not None:
            pipeline = self._engine.compile().resolve(_text(pipeline, "pipeline")).key
        rows = self._engine.runs(limit, pipeline=pipeline, status=_text(status, "status", optional=True),
                                 ref=_text(ref, "ref", optional=True))
        return Records([RunRecord.of(r) for r in rows], columns=RUN_COLUMNS, caption="run history")

    def get_run(self, run_id: str) -> RunRecord:
        """One run of the history (a unique prefix of its id is enough); RAT-RUN-004 if there is none."""
        self._check_open()
        row = self._engine.get_run(_text(run_id, "run_id"))
        if row is None:
            raise RatuiError("RAT-RUN-004", f"no run '{run_id}'")
        return RunRecord.of(row)

    def log(self, ref: str = MAIN, *, table: str | None = None, limit: int = 50) -> Records[Any]:
        """The ref's commits, newest first (what `ratui log` shows)."""
        self._check_open()
        entries = self._engine.log(_text(ref, "ref"), table=_text(table, "table", optional=True), limit=limit)
        return Records(entries, columns=LOG_COLUMNS, caption=f"log of {ref}")

    def diff(self, left: str, right: str = MAIN) -> Records[Any]:
        """Per table, what differs between two refs or past states (what `ratui diff` shows)."""
        self._check_open()
        left, right = _text(left, "ref"), _text(right, "ref")
        self._engine.resolve_ref(left)
        self._engine.resolve_ref(right)
        return Records(self._engine.diff_refs(left, right), columns=DIFF_COLUMNS, caption=f"{left} vs {right}")

    # --------------------------------------------------------------------------------------------- reading

    def table(self, name: str, ref: str = MAIN, *, at: str | None = None) -> "Table":
        """A table (its key, layer.name or name) at `ref`: a branch, a past state "main@3f2a9c", or the ref as it
        was at a time (`at="2026-01-31 12:00"`). Read from Iceberg metadata by PyIceberg: no Spark."""
        from ratui.api.tables import Table

        self._check_open()
        name, ref = _text(name, "table name"), _text(ref, "ref")
        resolved = self._resolve(ref, at)
        key = self._engine.resolve_table(name, resolved)
        return Table(self, key, resolved, self._engine.load_table(resolved, key))

    def sql(self, sql: str, ref: str = MAIN, *, at: str | None = None) -> "Query":
        """A query over the tables at `ref` (lazy: Spark starts when a result is asked for). The ref is checked now."""
        from ratui.api.queries import Query

        self._check_open()
        sql, ref = _text(sql, "sql"), _text(ref, "ref")
        return Query(self, sql, self._resolve(ref, at))

    def _resolve(self, ref: str, at: Any) -> str:
        """The ref checked ("ref@HASH" made whole), or its state at time `at`."""
        try:
            return self._engine.resolve_ref(ref, _text(at, "at", optional=True))
        except RatuiError as exc:
            if exc.code == "RAT-CLI-001":  # the time parser's code is the command line's; here it is an argument
                raise RatuiError("RAT-API-002", f"at={at!r} is not a time", hint=exc.hint) from None
            raise

    # --------------------------------------------------------------------------------------------- running

    def run(self, selector: str | Sequence[str] | None = None, *, wait: bool = True, ref: str = MAIN,
            full_refresh: bool = False, force: bool = False, atomic: bool = False,
            threads: int | None = None) -> RunResult | RunHandle:
        """Run pipelines in dependency order, like `ratui run SELECTOR...` (None: every pipeline): each on a
        branch of its own, merged into `ref` when its quality tests pass. Returns the RunResult, or with
        wait=False a RunHandle at once. Recorded with trigger "api": the console and `ratui runs` show them live.
        Interrupting a waiting run() (the notebook's stop button, Ctrl-C) cancels the runs: main stays as it was.

        A selected pipeline with definition errors stops everything before any run (RAT-RUN-008 with the first
        error in the message); so does any broken pipeline when no selector is given."""
        self._check_open()
        for flag, value in (("wait", wait), ("full_refresh", full_refresh), ("force", force), ("atomic", atomic)):
            if not isinstance(value, bool):
                raise RatuiError("RAT-API-002", f"{flag} must be True or False, got {value!r}")
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise RatuiError("RAT-API-002", f"threads must be a whole number of 1 or more, got {threads!r}")
        selectors = _selectors(selector)
        ref = _text(ref, "ref")
        engine = self._engine
        compiled = engine.compile()
        keys = compiled.select(selectors)
        blocking = compiled.all_errors() if not selectors else [e for k in keys for e in compiled.pipelines[k].errors]
        if blocking:
            first = blocking[0]
            raise RatuiError("RAT-RUN-008", f"{len(blocking)} problem(s) in "
                             + ("the project" if not selectors else "the selected pipelines")
                             + f": nothing was run; first: {first}", file=first.file, line=first.line,
                             details={"errors": [e.to_dict() for e in blocking]})
        if wait:  # answered by the project's running warm engine when this process has no Spark of its own
            from ratui.api.runs import run_in_engine

            served = run_in_engine(self, keys, ref=ref, full_refresh=full_refresh, force=force, atomic=atomic,
                                   threads=threads)
            if served is not None:
                return served
        invocation = engine.invocation(keys, trigger=TRIGGER, full_refresh=full_refresh, force=force,
                                       threads=threads, ref=ref, atomic=atomic)
        handle = RunHandle(self, invocation, ref)
        invocation.start()  # in the background either way: the calling thread stays free to be interrupted
        with self._lock:
            self._handles = [h for h in self._handles if not h.done] + [handle]
        if not wait:
            return handle
        try:
            while not invocation.wait(0.2):  # a timed wait: a signal's handler (the interrupt) runs in between
                pass
        except KeyboardInterrupt:  # the notebook's interrupt (or Ctrl-C): the runs are cancelled, main unchanged
            invocation.cancel()
            invocation.wait()
            raise
        return handle.result()

    def cancel(self, run_id: str) -> str:
        """Ask a run of any process to stop (like `ratui cancel`): 'requested', 'finished' or 'unknown'."""
        self._check_open()
        return self._engine.cancel(_text(run_id, "run_id"))

    # -------------------------------------------------------------------------------------------- branches

    def branch(self, name: str, from_: str = MAIN) -> "Branch":
        """A branch of yours to work on: created from `from_` (a ref or past state "main@HASH") unless it exists.
        Use it in a `with` block: if the block raises and this call created the branch, the branch is deleted
        (the exception goes on; what the block did not merge by hand never reaches main); otherwise the branch is
        kept. See Branch."""
        from ratui.api.branch import Branch

        self._check_open()
        name, from_ = _text(name, "branch name"), _text(from_, "from_")
        existing = {r.name for r in self._engine.refs()}
        if name in existing:
            from ratui.engine.ops.branches import check_writable

            check_writable(self._engine.state, name)  # a run's or a publish's branch is not yours
            return Branch(self, name, created=False, from_=self._engine.branch_origin(name))
        self._engine.create_branch(name, from_ref=self._engine.resolve_ref(from_))
        return Branch(self, name, created=True, from_=from_)

    def create_branch(self, name: str, from_: str = MAIN) -> RefInfo:
        """Create a branch (RAT-CAT-001 if it exists)."""
        self._check_open()
        ref = self._engine.create_branch(_text(name, "branch name"), from_ref=_text(from_, "from_"))
        return RefInfo.of(ref)

    def delete_branch(self, name: str) -> None:
        self._check_open()
        self._engine.delete_branch(_text(name, "branch name"))

    def merge(self, ref: str, into: str | None = None, *, dry_run: bool = False):
        """Merge a branch into `into` (default: the ref it was created from) by hand, like `ratui merge`: all or
        nothing; a table both sides changed is a conflict (RAT-CAT-003). Returns the engine's MergeResult."""
        self._check_open()
        ref = _text(ref, "ref")
        into = self._engine.branch_origin(ref) if into is None else _text(into, "into")
        if not isinstance(dry_run, bool):
            raise RatuiError("RAT-API-002", f"dry_run must be True or False, got {dry_run!r}")
        return self._engine.merge(ref, into=into, message=f"api: merge {ref} into {into}", dry_run=dry_run)

    # ------------------------------------------------------------------------------------------ display

    def _repr_html_(self) -> str:
        if self._closed:
            return html.table(["project"], [[str(self.root)]], caption="closed")
        refs = ", ".join(r.name for r in self.refs())
        return html.records(self.pipelines, PIPELINE_COLUMNS, caption=f"{self.root} (refs: {refs})")

    def __repr__(self) -> str:
        return f"<ratui.Project {self.root}{' (closed)' if self._closed else ''}>"
