"""Watch mode: the change -> plan mapping, the ignore rules, and the Watcher on real files with real watchfiles.

The Watcher takes its runner as `run_keys` (list of keys -> list of results); most tests pass a recorder,
so they need no Spark. One test runs the real engine on Spark end to end, and one the `ratui watch` CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ratui.engine.project.compiler import compile_project
from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import load_settings
from ratui.engine.events import (
    WatchErrors, WatchFailed, WatchPlanFinished, WatchPlanStarted, WatchReloaded, WatchRunResult, WatchStarted,
    WatchState, WatchStopped,
)
from ratui.engine.watch.ignore import is_ignored
from ratui.engine.watch.plan import plan_for_changes
from ratui.engine.watch.watcher import Watcher

A = "demo.bronze.a"
B = "demo.silver.b"
C = "demo.gold.c"
D = "demo.bronze.d"

FILES = {
    "demo/landing/src/one.csv": "id,name\n1,x\n",
    "demo/pipelines/bronze/a/pipeline.sql": "SELECT * FROM {{ landing_zone('src') }}\n",
    "demo/pipelines/silver/b/pipeline.sql": "SELECT * FROM {{ ref('bronze.a') }}\n",
    "demo/pipelines/gold/c/pipeline.sql": "SELECT * FROM {{ ref('silver.b') }}\n",
    "demo/pipelines/bronze/d/pipeline.sql": "SELECT 1 AS x\n",
    # another namespace with a zone of the same name: a change there is not demo's
    "other/landing/src/one.csv": "id\n1\n",
    "other/pipelines/bronze/o/pipeline.sql": "SELECT * FROM {{ landing_zone('src') }}\n",
}

DEBOUNCE = 80  # ms: short, so the suite stays fast
WAIT = 15.0  # s: generous upper bound for anything to happen on a loaded 2-core machine


@pytest.fixture
def proj(make_project) -> Path:
    return make_project(FILES).resolve()


def plan(root: Path, *paths):
    return plan_for_changes(compile_project(root), root, list(paths))


# ------------------------------------------------------------------------------------------- the mapping


def test_pipeline_file_change_runs_it_and_its_descendants(proj):
    p = plan(proj, "demo/pipelines/bronze/a/pipeline.sql")
    assert p.keys == [A, B, C]
    assert p.reasons[A] == "pipeline.sql changed"
    assert p.reasons[B] == f"downstream of {A}" and p.reasons[C] == f"downstream of {B}"
    assert not p.reload and not p.errors and p.changed == ["demo/pipelines/bronze/a/pipeline.sql"]

    assert plan(proj, proj / "demo/pipelines/silver/b/config.yaml").keys == [B, C]  # absolute paths too
    assert plan(proj, "demo/pipelines/gold/c/tests/quality/not_null.sql").keys == [C]
    assert plan(proj, "demo/pipelines/bronze/d/pipeline.sql").keys == [D]
    # several changes: one plan, each pipeline once, in run order
    p = plan(proj, "demo/pipelines/gold/c/pipeline.sql", "demo/pipelines/bronze/a/pipeline.sql",
             "demo/pipelines/bronze/d/pipeline.sql")
    assert p.keys == [A, D, B, C]
    # files in a pipeline folder the engine does not read change nothing
    assert plan(proj, "demo/pipelines/bronze/a/README.md").empty
    assert plan(proj, "demo/pipelines/bronze/a/tests/quality/notes.txt").empty


def test_new_pipeline_folder_counts_as_a_change_to_it(proj):
    (proj / "demo/pipelines/gold/e").mkdir()
    (proj / "demo/pipelines/gold/e/pipeline.sql").write_text("SELECT * FROM {{ ref('bronze.d') }}\n")
    p = plan(proj, "demo/pipelines/gold/e")
    assert p.keys == ["demo.gold.e"] and p.reasons["demo.gold.e"] == "folder changed"
    # a whole layer folder moved in: every pipeline under it
    assert plan(proj, "demo/pipelines/gold").keys == [C, "demo.gold.e"]


def test_landing_zone_change_runs_its_readers_in_the_same_namespace(proj):
    p = plan(proj, "demo/landing/src/two.csv")
    assert p.keys == [A, B, C]
    assert p.reasons[A] == "landing zone 'src' changed: two.csv changed"
    assert plan(proj, "other/landing/src/two.csv").keys == ["other.bronze.o"]
    # what the engine never reads from a zone does not trigger
    assert plan(proj, "demo/landing/src/_processed/r1/one.csv").empty
    assert plan(proj, "demo/landing/src/_samples/s.csv").empty
    assert plan(proj, "demo/landing/src/deeper/x.csv").empty
    assert plan(proj, "demo/landing/nobody_reads_this/x.csv").empty
    # a file the engine archived after a merge is gone from the zone's root: no feedback loop
    (proj / "demo/landing/src/_processed/r1").mkdir(parents=True)
    (proj / "demo/landing/src/one.csv").rename(proj / "demo/landing/src/_processed/r1/one.csv")
    assert plan(proj, "demo/landing/src/one.csv").empty
    # a file a user deleted does change the zone
    (proj / "demo/landing/src/three.csv").write_text("id\n3\n")
    (proj / "demo/landing/src/three.csv").unlink()
    assert plan(proj, "demo/landing/src/three.csv").keys == [A, B, C]


def test_ratui_yaml_reloads_and_runs_nothing_by_itself(proj):
    p = plan(proj, "ratui.yaml")
    assert p.reload and p.keys == [] and p.changed == ["ratui.yaml"]
    p = plan(proj, "ratui.yaml", "demo/pipelines/bronze/d/pipeline.sql")
    assert p.reload and p.keys == [D]


def test_broken_pipeline_is_reported_not_run_and_blocks_only_its_own_descendants(proj):
    (proj / "demo/pipelines/silver/b/pipeline.sql").write_text("SELECT * FROM {{ ref('bronze.a') \n")
    p = plan(proj, "demo/pipelines/silver/b/pipeline.sql")
    assert p.keys == [] and p.blocked == [B]
    assert [e.code for e in p.errors] == ["RAT-TPL-001"]
    assert "b/pipeline.sql" in p.errors[0].render()
    # upstream changed: it runs, the broken one (whose refs are known) is reported, and what lies only
    # behind it does not run
    (proj / "demo/pipelines/silver/b/pipeline.sql").write_text(
        "SELECT * FROM {{ ref('bronze.a') }} JOIN {{ ref('bronze.zzz') }}\n")
    p = plan(proj, "demo/pipelines/bronze/a/pipeline.sql")
    assert p.keys == [A] and p.blocked == [B] and [e.code for e in p.errors] == ["RAT-DAG-002"]


def test_deleted_pipeline_reports_its_dependents(proj):
    import shutil

    shutil.rmtree(proj / "demo/pipelines/bronze/a")
    p = plan(proj, "demo/pipelines/bronze/a/pipeline.sql", "demo/pipelines/bronze/a")
    assert p.keys == [] and p.blocked == [B]
    assert [e.code for e in p.errors] == ["RAT-DAG-002"]


def test_project_level_problem_under_a_changed_folder_is_reported(proj):
    (proj / "demo/pipelines/platinum/x").mkdir(parents=True)
    p = plan(proj, "demo/pipelines/platinum")
    assert [e.code for e in p.errors] == ["RAT-PRJ-002"]


@pytest.mark.parametrize("rel", [
    ".ratui/ratui.db-wal", ".ratui/logs/spark.log", "demo/warehouse/bronze/a/data/x.parquet",
    "demo/warehouse/bronze/a/metadata/v1.json", "demo/landing/src/_processed/r1/one.csv",
    "demo/landing/src/_samples/x.csv", "demo/pipelines/bronze/a/.pipeline.sql.swp",
    "demo/pipelines/bronze/a/.pipeline.sql.swo", "demo/pipelines/bronze/a/pipeline.sql~",
    "demo/pipelines/bronze/a/4913", "demo/pipelines/bronze/a/.#pipeline.sql",
    "demo/pipelines/bronze/a/#pipeline.sql#", "demo/pipelines/bronze/a/.DS_Store",
    "demo/pipelines/bronze/a/pipeline.sql___jb_tmp___", "demo/pipelines/bronze/a/pipeline.sql___jb_old___",
    "demo/pipelines/bronze/a/__pycache__/pipeline.cpython-311.pyc", ".git/index", "demo/landing/src/.one.csv.tmp",
])
def test_ignored_paths(tmp_path, rel):
    assert is_ignored(tmp_path, tmp_path / rel)
    assert is_ignored(tmp_path, rel)


@pytest.mark.parametrize("rel", [
    "ratui.yaml", "demo/pipelines/bronze/a/pipeline.sql", "demo/pipelines/gold/warehouse/pipeline.sql",
    "demo/landing/src/one.csv", "demo/pipelines/bronze/a/tests/quality/t.sql",
])
def test_not_ignored_paths(tmp_path, rel):
    assert not is_ignored(tmp_path, tmp_path / rel)


def test_watch_debounce_setting(make_project):
    root = make_project({})
    assert load_settings(root).watch_debounce_ms == 300
    with open(root / "ratui.yaml", "a") as f:
        f.write("watch:\n  debounce_ms: 120\n")
    assert load_settings(root).watch_debounce_ms == 120
    (root / "ratui.yaml").write_text("namespace: demo\nwatch:\n  debounce: 100\n")
    with pytest.raises(RatuiError) as exc:
        load_settings(root)
    assert exc.value.code == "RAT-CFG-007" and "debounce_ms" in exc.value.hint
    (root / "ratui.yaml").write_text("namespace: demo\nwatch:\n  debounce_ms: -1\n")
    with pytest.raises(RatuiError, match="watch.debounce_ms"):
        load_settings(root)


# ------------------------------------------------------------------------------------------- the watcher


@dataclass
class Result:
    pipeline: str
    status: str = "success"


class Recorder:
    """A runner for the Watcher: records each call; optionally holds the first call until released."""

    def __init__(self, hold_first: bool = False, fail_first: bool = False):
        self.calls: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.hold_first = hold_first
        self.fail_first = fail_first
        self.lock = threading.Lock()

        self.active = self.max_active = 0

    def __call__(self, keys: list[str]) -> list:
        with self.lock:
            self.calls.append(list(keys))
            first = len(self.calls) == 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.started.set()
        try:
            if first and self.hold_first:
                assert self.release.wait(WAIT)
            if first and self.fail_first:
                raise RuntimeError("runner exploded")
            return [Result(k) for k in keys]
        finally:
            with self.lock:
                self.active -= 1


class Events:
    def __init__(self):
        self.items: list = []
        self.cond = threading.Condition()

    def __call__(self, event) -> None:
        with self.cond:
            self.items.append(event)
            self.cond.notify_all()

    def of(self, kind) -> list:
        with self.cond:
            return [e for e in self.items if isinstance(e, kind)]

    def wait_for(self, kind, count: int = 1, timeout: float = WAIT) -> list:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len([e for e in self.items if isinstance(e, kind)]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {count} {kind.__name__}; got {self.items}")
                self.cond.wait(left)
            return [e for e in self.items if isinstance(e, kind)]


@pytest.fixture
def watch(proj):
    started: list[Watcher] = []

    def make(runner=None, debounce_ms: int = DEBOUNCE):
        events = Events()
        watcher = Watcher(proj, run_keys=runner or Recorder(), debounce_ms=debounce_ms, on_event=events)
        started.append(watcher.start())
        return watcher, events

    yield make
    for w in started:
        w.stop(timeout=5)


def save(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


SENTINEL = "demo.bronze.sentinel"


def nothing_else_ran(proj: Path, events: Events, runner: Recorder) -> None:
    """Instead of watching a while for nothing more to happen: save a sentinel pipeline and wait for its plan. The
    watcher plans changes in the order they came, on one worker, so once the sentinel's plan has finished, any plan
    an earlier change caused has finished before it, and shows in runner.calls and the events; a stray change left
    pending would have joined the sentinel's plan, which must be the sentinel alone. The sentinel's own plan is then
    taken off the calls and the events, so the test's assertions read as before."""
    path = proj / "demo/pipelines/bronze/sentinel/pipeline.sql"
    save(path, f"SELECT {time.monotonic_ns()} AS sentinel\n")

    def sentinel_done() -> bool:
        return any(SENTINEL in e.keys for e in events.of(WatchPlanFinished))

    deadline = time.monotonic() + WAIT
    while not sentinel_done():
        assert time.monotonic() < deadline, f"the sentinel's plan did not finish within {WAIT} s: {events.items}"
        time.sleep(0.02)
    with runner.lock:
        assert runner.calls[-1] == [SENTINEL], runner.calls  # nothing pending joined it
        runner.calls.pop()
    with events.cond:
        first = next(i for i, e in enumerate(events.items) if isinstance(e, WatchPlanStarted) and SENTINEL in e.keys)
        events.items[first:] = [e for e in events.items[first:] if not (
            isinstance(e, (WatchPlanStarted, WatchPlanFinished)) and SENTINEL in e.keys
            or isinstance(e, WatchRunResult) and e.result.pipeline == SENTINEL or isinstance(e, WatchState))]


def test_watcher_runs_a_saved_pipeline_and_its_descendants(proj, watch):
    runner = Recorder()
    watcher, events = watch(runner)
    assert events.of(WatchStarted)[0].debounce_ms == DEBOUNCE and watcher.state == "watching"
    save(proj / "demo/pipelines/silver/b/pipeline.sql", "SELECT id FROM {{ ref('bronze.a') }}\n")
    (plan_event,) = events.wait_for(WatchPlanStarted)
    assert plan_event.keys == (B, C) and plan_event.changed == ("demo/pipelines/silver/b/pipeline.sql",)
    finished = events.wait_for(WatchPlanFinished)[0]
    assert [r.pipeline for r in finished.results] == [B, C] and finished.error is None
    assert [e.result.pipeline for e in events.of(WatchRunResult)] == [B, C]
    assert runner.calls == [[B, C]]
    assert "running" in [e.state for e in events.of(WatchState)]


def test_landing_file_and_new_pipeline_folder_trigger(proj, watch):
    runner = Recorder()
    watcher, events = watch(runner)
    save(proj / "demo/landing/src/two.csv", "id,name\n2,y\n")
    events.wait_for(WatchPlanFinished)
    assert runner.calls == [[A, B, C]]
    save(proj / "demo/pipelines/gold/e/pipeline.sql", "SELECT * FROM {{ ref('bronze.d') }}\n")
    events.wait_for(WatchPlanFinished, 2)
    assert runner.calls[1] == ["demo.gold.e"]


def test_engine_and_editor_files_never_trigger(proj, watch):
    runner = Recorder()
    watcher, events = watch(runner)
    a = proj / "demo/pipelines/bronze/a"
    for rel in [".ratui/ratui.db-wal", ".ratui/logs/run.log", "demo/warehouse/bronze/a/data/part-0.parquet",
                "demo/warehouse/bronze/a/metadata/v1.metadata.json", "demo/landing/src/_processed/r1/one.csv",
                "demo/landing/src/_samples/s.csv", "demo/pipelines/bronze/a/__pycache__/x.pyc"]:
        save(proj / rel, "x")
    for name in (".pipeline.sql.swp", "pipeline.sql~", "4913", ".#pipeline.sql", "#pipeline.sql#",
                 "pipeline.sql___jb_tmp___", ".DS_Store"):
        save(a / name, "x")
    (proj / "demo/landing/src/_processed/r1/one.csv").unlink()  # deletions too
    import shutil

    (proj / "demo/landing/src/_processed/r2").mkdir()  # the engine archiving a consumed landing file
    shutil.move(proj / "demo/landing/src/one.csv", proj / "demo/landing/src/_processed/r2/one.csv")
    nothing_else_ran(proj, events, runner)
    assert runner.calls == [] and events.of(WatchPlanStarted) == [] and events.of(WatchErrors) == []
    assert watcher.state == "watching"
    # the watcher was live all along: a real save does trigger
    save(a / "pipeline.sql", "SELECT * FROM {{ landing_zone('src') }} WHERE id > 0\n")
    events.wait_for(WatchPlanFinished)
    assert runner.calls == [[A, B, C]]


def test_a_burst_of_saves_gives_one_plan_with_each_pipeline_once(proj, watch):
    runner = Recorder()
    watcher, events = watch(runner, debounce_ms=300)
    d = proj / "demo/pipelines/bronze/d/pipeline.sql"
    saved_at = []
    for i in range(5):  # 5 saves within ~100 ms
        save(d, f"SELECT {i} AS x\n")
        saved_at.append(time.monotonic())
        time.sleep(0.02)
    assert max(b - a for a, b in zip(saved_at, saved_at[1:])) < 0.3  # each save fell inside the quiet period
    events.wait_for(WatchPlanFinished)
    nothing_else_ran(proj, events, runner)
    assert runner.calls == [[D]]
    assert len(events.of(WatchPlanStarted)) == 1


def test_saves_during_a_run_queue_exactly_one_follow_up(proj, watch):
    runner = Recorder(hold_first=True)
    watcher, events = watch(runner)
    d = proj / "demo/pipelines/bronze/d/pipeline.sql"
    save(d, "SELECT 1 AS x\n")
    assert runner.started.wait(WAIT)
    assert watcher.state == "running"
    for i in range(3):  # each save outlives the debounce: without coalescing, three follow-ups
        save(d, f"SELECT {i + 2} AS x\n")
        time.sleep(DEBOUNCE / 1000 * 2)
    c = proj / "demo/pipelines/gold/c/pipeline.sql"
    save(c, "SELECT * FROM {{ ref('silver.b') }} WHERE 1 = 1\n")
    deadline = time.monotonic() + WAIT  # the watcher has the saves (its pending changes), and runs none of them
    while str(c) not in watcher._changes:
        assert time.monotonic() < deadline, "the watcher never saw the save of c"
        time.sleep(0.02)
    assert runner.calls == [[D]]  # still only the first run: it is in flight
    runner.release.set()
    events.wait_for(WatchPlanFinished, 2)
    nothing_else_ran(proj, events, runner)
    assert runner.calls == [[D], [D, C]]
    assert len(events.of(WatchPlanFinished)) == 2


def test_broken_file_is_reported_then_fixing_it_runs(proj, watch):
    runner = Recorder()
    watcher, events = watch(runner)
    b = proj / "demo/pipelines/silver/b/pipeline.sql"
    save(b, "SELECT * FROM {{ ref('bronze.a') \n")
    (err,) = events.wait_for(WatchErrors)
    assert [e.code for e in err.errors] == ["RAT-TPL-001"] and err.blocked == (B,)
    assert "error[RAT-TPL-001]" in err.errors[0].render() and str(b) in err.errors[0].render()
    nothing_else_ran(proj, events, runner)
    assert runner.calls == [] and watcher.state == "watching"
    save(b, "SELECT * FROM {{ ref('bronze.a') }}\n")
    events.wait_for(WatchPlanFinished)
    assert runner.calls == [[B, C]]
    assert len(events.of(WatchErrors)) == 1


def test_the_watcher_survives_a_runner_that_raises(proj, watch):
    runner = Recorder(fail_first=True)
    watcher, events = watch(runner)
    d = proj / "demo/pipelines/bronze/d/pipeline.sql"
    save(d, "SELECT 2 AS x\n")
    (failed,) = events.wait_for(WatchFailed)
    assert "runner exploded" in failed.message and "RuntimeError" in failed.details
    assert events.wait_for(WatchPlanFinished)[0].error == "RuntimeError: runner exploded"
    save(d, "SELECT 3 AS x\n")
    events.wait_for(WatchPlanFinished, 2)
    assert runner.calls == [[D], [D]]
    assert events.of(WatchPlanFinished)[1].error is None
    assert watcher.running


def test_ratui_yaml_reload_applies_settings_and_keeps_old_ones_when_broken(proj):
    runner = Recorder()
    watcher = Watcher(proj, run_keys=runner, on_event=(events := Events()))  # debounce from ratui.yaml
    assert watcher.debounce_ms == 300
    watcher.debounce_ms = DEBOUNCE  # quicker test; the reload below sets it from the file
    watcher.start()
    try:
        text = (proj / "ratui.yaml").read_text()
        save(proj / "ratui.yaml", text + "watch:\n  debounce_ms: 120\n")
        (reloaded,) = events.wait_for(WatchReloaded)
        assert reloaded.debounce_ms == 120 and watcher.debounce_ms == 120
        assert watcher.settings.watch_debounce_ms == 120
        save(proj / "ratui.yaml", text + "watch:\n  debounce_msec: 50\n")
        (err,) = events.wait_for(WatchErrors)
        assert err.errors[0].code == "RAT-CFG-007" and watcher.debounce_ms == 120
        nothing_else_ran(proj, events, runner)
        assert runner.calls == []
    finally:
        watcher.stop(timeout=5)
    assert watcher.state == "stopped" and not watcher.running
    assert len(events.of(WatchStopped)) == 1


def test_stop_is_prompt_and_idempotent(proj):
    watcher = Watcher(proj, run_keys=Recorder(), debounce_ms=DEBOUNCE).start()
    assert watcher.running
    began = time.monotonic()
    watcher.stop()
    assert time.monotonic() - began < 3 and not watcher.running
    watcher.stop()


def test_toggle_off_and_on_during_a_run_never_runs_two_plans_at_once(proj):
    runner = Recorder(hold_first=True)
    events = Events()
    watcher = Watcher(proj, run_keys=runner, debounce_ms=DEBOUNCE, on_event=events).start()
    try:
        d = proj / "demo/pipelines/bronze/d/pipeline.sql"
        save(d, "SELECT 1 AS x\n")
        assert runner.started.wait(WAIT)
        began = time.monotonic()
        old_watch = watcher._threads[0]  # the file system watch of the first start (its worker is in the run)
        watcher.stop(timeout=0)  # a UI toggles off without waiting for the run
        assert time.monotonic() - began < 1 and watcher.state == "stopped" and not watcher.running
        old_watch.join(WAIT)  # ends at its next timeout (0.1 s) without waiting for the run
        assert not old_watch.is_alive()
        save(d, "SELECT 2 AS x\n")  # unseen: not watching
        watcher.start()
        assert watcher.running and len(events.of(WatchStarted)) == 2
        save(d, "SELECT 3 AS x\n")
        deadline = time.monotonic() + WAIT  # the restarted watcher has the save: its pending changes hold it
        while str(d) not in watcher._changes:
            assert time.monotonic() < deadline, "the restarted watcher never saw the save"
            time.sleep(0.02)
        assert runner.calls == [[D]]  # the new plan waits for the old one
        runner.release.set()
        events.wait_for(WatchPlanFinished, 2)
        assert runner.calls == [[D], [D]] and runner.max_active == 1
        assert events.of(WatchPlanFinished)[0].error == "stopped"
    finally:
        watcher.stop(timeout=5)


# ------------------------------------------------------------------------------------------- end to end


def test_saving_a_pipeline_triggers_a_real_run(make_project, spark):
    from ratui.engine.events import RunStarted
    from ratui.engine.facade.engine import Engine

    root = make_project({"demo/pipelines/bronze/nums/pipeline.sql": "SELECT 1 AS id\n"}).resolve()
    engine = Engine.open(root)
    started = []
    engine.subscribe(lambda e: started.append(e) if isinstance(e, RunStarted) else None)
    events = Events()
    watcher = Watcher(engine=engine, debounce_ms=100, on_event=events).start()
    try:
        save(root / "demo/pipelines/bronze/nums/pipeline.sql", "SELECT id FROM VALUES (1), (2), (3) AS t(id)\n")
        (done,) = events.wait_for(WatchPlanFinished, timeout=120)
    finally:
        watcher.stop()
    (result,) = done.results
    assert result.status == "success", result.error
    assert result.pipeline == "demo.bronze.nums" and result.rows_written == 3
    assert [e.pipeline for e in started] == ["demo.bronze.nums"]
    run = engine.state.history.get_run(result.run_id)
    assert run["trigger"] == "watch" and run["status"] == "success"
    # the run's own writes (.ratui/, warehouse/) did not trigger another plan
    assert len(events.of(WatchPlanStarted)) == 1


def test_a_landing_file_still_being_copied_when_the_watch_runs_lands_once_whole(make_project, spark):
    """The first chunk of a copy into a zone starts a run; the rest arrives while that run reads the file. That
    run fails (RAT-LND-010, nothing merged), the watch runs again for the change it saw meanwhile, and the table
    ends with every row of the finished file exactly once."""
    from ratui.engine.events import PhaseStarted
    from ratui.engine.facade.engine import Engine

    root = make_project({
        "demo/pipelines/bronze/events/pipeline.sql": "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
                                                     "SELECT * FROM {{ landing_zone('events') }}\n",
        "demo/landing/events/.keep": "",
    }).resolve()
    engine = Engine.open(root)
    landing = root / "demo/landing/events/big.csv"
    rest = "".join(f"{i},view\n" for i in range(3, 201))
    copied = []

    def copy_the_rest(event) -> None:
        if isinstance(event, PhaseStarted) and event.phase == "write" and not copied:
            copied.append(True)
            with landing.open("a") as out:
                out.write(rest)

    engine.subscribe(copy_the_rest)
    events = Events()
    watcher = Watcher(engine=engine, debounce_ms=100, on_event=events).start()
    try:
        save(landing, "id,kind\n1,view\n2,view\n")  # the copy's first chunk
        first, second = events.wait_for(WatchPlanFinished, count=2, timeout=180)
    finally:
        watcher.stop()
    assert [(r.status, (r.error or {}).get("code")) for r in first.results] == [("failed", "RAT-LND-010")]
    assert [(r.status, r.rows_written) for r in second.results] == [("success", 200)]
    table = engine.state.catalog.load_table("main", "demo.bronze.events").scan().to_arrow()
    assert sorted(table.column("id").to_pylist()) == list(range(1, 201))


def test_a_watch_on_a_branch_runs_there_and_leaves_main_alone(make_project, spark):
    from ratui.engine.facade.engine import Engine

    root = make_project({"demo/pipelines/bronze/nums/pipeline.sql": "SELECT 1 AS id\n"}).resolve()
    engine = Engine.open(root)
    assert [r.status for r in engine.run(["demo.bronze.nums"])] == ["success"]
    engine.create_branch("dev")
    main_before = engine.table_pointers("main")
    ref = ["dev"]
    events = Events()
    watcher = Watcher(engine=engine, debounce_ms=100, on_event=events, ref=lambda: ref[0]).start()
    try:
        save(root / "demo/pipelines/bronze/nums/pipeline.sql", "SELECT id FROM VALUES (1), (2), (3) AS t(id)\n")
        (done,) = events.wait_for(WatchPlanFinished, timeout=120)
        assert [(r.status, r.rows_written) for r in done.results] == [("success", 3)]
        assert engine.get_run(done.results[0].run_id)["ref"] == "dev"
        assert engine.table_pointers("main") == main_before
        assert engine.query("SELECT count(*) FROM bronze.nums", ref="dev")[1] == [[3]]
        # the branch deleted under the watch: the next plan says so and nothing runs on main
        engine.delete_branch("dev")
        save(root / "demo/pipelines/bronze/nums/pipeline.sql", "SELECT 7 AS id\n")
        (failed,) = events.wait_for(WatchFailed, timeout=60)
        assert "RAT-CAT-002" in failed.message
    finally:
        watcher.stop()
    assert engine.table_pointers("main") == main_before


def test_cli_watch_reports_a_broken_file_and_exits_0_on_ctrl_c(proj):
    import queue

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ratui", "watch", "--project", str(proj), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    errors: list[str] = []  # drained as it comes: a full stderr pipe would block the watch
    drain = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    drain.start()

    def next_json() -> dict:
        try:
            return json.loads(lines.get(timeout=60))
        except queue.Empty:
            raise AssertionError(f"no output from ratui watch; stderr: {''.join(errors)}") from None

    try:
        assert next_json() == {"event": "WatchStarted", "root": str(proj), "debounce_ms": 300}
        save(proj / "demo/pipelines/bronze/d/pipeline.sql", "SELECT {{ nope( }}\n")
        line = next_json()
        assert line["event"] == "WatchErrors" and line["errors"][0]["code"] == "RAT-TPL-001"
        assert line["changed"] == ["demo/pipelines/bronze/d/pipeline.sql"] and line["blocked"] == [D]
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)  # twice beyond 30 s in loaded unit runs of 2026-11-29, never alone: say why next time
        except subprocess.TimeoutExpired:
            masks = [line for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                     if line.startswith(("SigBlk", "SigIgn", "SigCgt"))]  # was SIGINT (bit 2) blocked or ignored?
            errors.append(f"signal masks: {masks}\n")
            proc.send_signal(signal.SIGABRT)  # faulthandler (PYTHONFAULTHANDLER) writes every thread's stack
            proc.wait(10)
            drain.join(10)  # stderr's end: the drain has every line
            raise AssertionError(f"ratui watch did not end within 60 s of Ctrl-C; stderr:\n{''.join(errors)}") \
                from None
        assert code == 0
        assert next_json() == {"event": "WatchStopped"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
