"""`ratui up` as a team runs it: real runner processes of the installed CLI on one project, the schedule clock
accelerated (RATUI_TEST_CLOCK, test-only: cron fires at minutes; at 20x a `* * * * *` schedule fires every three
seconds) and everything else real (Spark, SQLite, the lease, signals, /healthz over HTTP).

One runner holds the lease and fires (its runs in `ratui runs --json` with trigger `schedule` and the schedule's
name); a second one names the holder's pid and host and waits; the holder SIGKILLed, the second takes over within
the lease time and nothing fires twice; SIGTERM ends a runner with exit 0."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ratui.engine.project.scaffold import init_project
from tests.processes import stop_group

LEASE = 4
TOKEN = "runner-test-token-0123456789"
SETTINGS = f"""\
spark:
  master: local[1]
  config:
    spark.sql.shuffle.partitions: 1
    spark.default.parallelism: 1
runner:
  lease_seconds: {LEASE}
  loop_seconds: 1
  grace_seconds: 20
schedules:
  - {{name: ticker, select: gold.ticks, cron: "* * * * *"}}
"""


class Runner:
    """A `ratui up --json` process and the events it printed."""

    def __init__(self, root: Path, env: dict[str, str], *extra: str):
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ratui", "up", "--project", str(root), "--json", "--health-port", str(self.port),
             *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        self.events: list[dict] = []
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, test, timeout: float = 240.0) -> dict:
        """The first event (seen or to come) that passes `test`."""
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[seen:]:
                if test(event):
                    return event
            seen = len(self.events)
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such event in {timeout:.0f} s; saw {self.events[-8:]}") from None
            if line is None:
                raise AssertionError(f"the runner ended ({self.proc.wait()}); saw {self.events[-8:]}")
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            # a line that is no runner event (a coded error's JSON, a word on stderr) is kept as text, said whole
            self.events.append(event if isinstance(event, dict) and "event" in event
                               else {"event": "text", "line": line.rstrip()})

    def health(self, headers: dict[str, str] | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/healthz", headers=headers if headers is not None
                                         else {"Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())


_HANDED: set[int] = set()  # ports given to runners of this test process: two runners never get the same one


def _free_port() -> int:
    """A port free now and not given to another runner of this process (the kernel may hand the same free port to
    two probes in a row: two runners started at once then both bound it, and one ended with RAT-SCH-006)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _HANDED:
            _HANDED.add(port)
            return port


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = init_project(tmp_path / "p", None)
    (root / "ratui.yaml").write_text("namespace: p\n" + SETTINGS)
    ticks = root / "p" / "pipelines" / "gold" / "ticks"
    ticks.mkdir(parents=True)
    (ticks / "pipeline.sql").write_text("-- @merge_strategy: full_refresh\nSELECT 1 AS one\n")
    return root


@pytest.fixture()
def env() -> dict[str, str]:
    return {**os.environ, "RATUI_TEST_CLOCK": f"{time.time():.0f}:20", "RATUI_UP_TOKEN": TOKEN, "RATUI_WARM": "0"}


def _fires(root: Path) -> list[dict]:
    with sqlite3.connect(root / ".ratui" / "ratui.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM schedule_fires ORDER BY id")]


def _until_schedule_clock_passes(env: dict[str, str], fire_at: str, minutes: int) -> None:
    """Wait (the real time it takes) until the accelerated schedule clock reads `minutes` past `fire_at`."""
    from datetime import datetime

    origin, speed = (float(part) for part in env["RATUI_TEST_CLOCK"].split(":"))
    target = datetime.fromisoformat(fire_at).timestamp() + minutes * 60
    wall = origin + (target - origin) / speed
    while time.time() < wall:
        time.sleep(min(0.5, wall - time.time()) if wall > time.time() else 0)


def _scheduled_runs(root: Path) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "ratui", "runs", "--project", str(root), "--json", "--limit", "200"],
                          capture_output=True, text=True, timeout=120)
    runs = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return [r for r in runs if r.get("trigger") == "schedule"]


def test_one_runner_fires_the_other_waits_and_takes_over_after_a_sigkill(project: Path, env):
    first = Runner(project, env)
    second = None
    try:
        first.wait_for(lambda e: e["event"] == "lease")
        second = Runner(project, env)
        waiting = second.wait_for(lambda e: e["event"] == "waiting")
        assert (waiting["holder_pid"], waiting["holder_host"]) == (first.proc.pid, socket.gethostname())

        # the holder's /healthz: alive, its last loop, the lease; the door of every ratui endpoint
        code, status = first.health()
        assert code == 200 and status["alive"] and status["holding_lease"] and status["last_loop"]
        assert status["lease"]["pid"] == first.proc.pid
        assert first.health({})[0] == 401
        assert first.health({"Authorization": "Bearer not-the-token-at-all-x"})[0] == 403
        assert first.health({"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})[0] == 403
        assert first.health({"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"})[0] == 403
        code, status = second.health()
        assert code == 200 and not status["holding_lease"] and status["lease"]["pid"] == first.proc.pid

        # it fires: a run recorded with trigger schedule and the schedule's name
        started = first.wait_for(lambda e: e["event"] == "started")
        first.wait_for(lambda e: e["event"] == "finished" and e["invocation"] == started["invocation"])
        runs = _scheduled_runs(project)
        assert any(r["invocation"] == started["invocation"] and r["schedule"] == "ticker"
                   and r["pipeline"] == "p.gold.ticks" for r in runs)

        # the holder dies: the second takes over within the lease time, and fires
        os.killpg(first.proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        first.proc.wait(timeout=30)
        second.wait_for(lambda e: e["event"] == "lease", timeout=LEASE + 30)
        assert time.monotonic() - killed_at <= LEASE + 3  # its loop wakes at the lease's expiry
        taken = second.wait_for(lambda e: e["event"] == "started")
        second.wait_for(lambda e: e["event"] == "finished" and e["invocation"] == taken["invocation"])

        # SIGTERM: exit 0, the lease given up
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=60) == 0
        second.wait_for(lambda e: e["event"] == "stopped")
    finally:
        for runner in (first, second):
            if runner is not None and runner.proc.poll() is None:
                stop_group(runner.proc)

    fires = _fires(project)
    fired = [f["fire_at"] for f in fires]
    assert len(fired) == len(set(fired)), "a fire was decided twice"
    invocations = [f["invocation"] for f in fires if f["action"] == "run"]
    assert started["invocation"] in invocations and taken["invocation"] in invocations
    by_invocation: dict[str, int] = {}
    for run in _scheduled_runs(project):
        by_invocation[run["invocation"]] = by_invocation.get(run["invocation"], 0) + 1
    assert set(by_invocation) <= set(invocations) and all(n == 1 for n in by_invocation.values())
    assert {f["pid"] for f in fires if f["action"] == "run"} == {first.proc.pid, second.proc.pid}


def test_overlap_is_skipped_sigterm_cancels_after_the_grace_and_a_restart_catches_up(project: Path, env):
    slow = project / "p" / "pipelines" / "gold" / "ticks" / "pipeline.sql"
    slow.write_text("-- @merge_strategy: full_refresh\n"
                    "SELECT sum(a.id % 7 + b.id % 5) AS s FROM range(0, 400000) a CROSS JOIN range(0, 400000) b\n")
    runner = Runner(project, env, "--grace-seconds", "2")
    try:
        started = runner.wait_for(lambda e: e["event"] == "started")
        # the next fires come while that run goes: skipped, and recorded with why
        skipped = runner.wait_for(lambda e: e["event"] == "fire" and e["action"] == "skipped")
        assert "previous run is still going" in skipped["reason"]
        runner.proc.send_signal(signal.SIGTERM)
        # a grace of 2 s, then the run in flight is cancelled; the runner exits 0
        assert runner.proc.wait(timeout=120) == 0
    finally:
        if runner.proc.poll() is None:
            stop_group(runner.proc)
    runs = [r for r in _scheduled_runs(project) if r["invocation"] == started["invocation"]]
    assert [r["status"] for r in runs] == ["cancelled"]
    assert "then cancelled" in runner.wait_for(lambda e: e["event"] == "stopping")["message"]

    # started again after missing fires: one run for all of them (catch_up last), its reason says how many
    slow.write_text("-- @merge_strategy: full_refresh\nSELECT 2 AS two\n")
    _until_schedule_clock_passes(env, max(f["fire_at"] for f in _fires(project)), minutes=3)
    again = Runner(project, env)
    try:
        fire = again.wait_for(lambda e: e["event"] == "fire" and e["action"] == "run")
        assert "catching up" in fire["reason"] and "missed fire(s)" in fire["reason"]
        again.wait_for(lambda e: e["event"] == "finished" and e["invocation"] == fire["invocation"])
    finally:
        stop_group(again.proc, grace=60)
    assert again.proc.returncode == 0
    fired = [f["fire_at"] for f in _fires(project)]
    assert len(fired) == len(set(fired))


def test_up_with_watch_reruns_a_saved_file_while_it_holds_the_lease(project: Path, env):
    (project / "ratui.yaml").write_text((project / "ratui.yaml").read_text().replace(
        'cron: "* * * * *"}', 'cron: "* * * * *", enabled: false}'))
    runner = Runner(project, env, "--watch")
    try:
        runner.wait_for(lambda e: e["event"] == "lease")
        runner.wait_for(lambda e: e["event"] == "watch" and e["watch_event"] == "WatchStarted")
        (project / "p" / "pipelines" / "gold" / "ticks" / "pipeline.sql").write_text(
            "-- @merge_strategy: full_refresh\nSELECT 3 AS three\n")
        done = runner.wait_for(lambda e: e["event"] == "watch" and e["watch_event"] == "WatchPlanFinished")
        assert done["keys"] == ["p.gold.ticks"]
        runner.proc.send_signal(signal.SIGTERM)
        assert runner.proc.wait(timeout=60) == 0
    finally:
        if runner.proc.poll() is None:
            stop_group(runner.proc)
    assert not any(e["event"] == "fire" for e in runner.events)  # a disabled schedule never fires


def test_a_runner_killed_mid_run_its_run_is_recovered_as_dead_and_the_other_fires_again(project: Path, env):
    slow = project / "p" / "pipelines" / "gold" / "ticks" / "pipeline.sql"
    slow.write_text("-- @merge_strategy: full_refresh\n"
                    "SELECT sum(a.id % 7 + b.id % 5) AS s FROM range(0, 400000) a CROSS JOIN range(0, 400000) b\n")
    first = Runner(project, env)
    second = None
    try:
        first.wait_for(lambda e: e["event"] == "lease")
        second = Runner(project, env, "--grace-seconds", "1")
        second.wait_for(lambda e: e["event"] == "waiting")
        killed = first.wait_for(lambda e: e["event"] == "started")
        _until_running(project, killed["invocation"])
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=30)
        second.wait_for(lambda e: e["event"] == "lease", timeout=LEASE + 30)
        again = second.wait_for(lambda e: e["event"] == "started")
        assert again["invocation"] != killed["invocation"]
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=120) == 0
    finally:
        for runner in (first, second):
            if runner is not None and runner.proc.poll() is None:
                stop_group(runner.proc)
    dead = [r for r in _scheduled_runs(project) if r["invocation"] == killed["invocation"]]
    assert [r["status"] for r in dead] == ["failed"]  # recovered as dead, not left running
    fired = [f["fire_at"] for f in _fires(project)]
    assert len(fired) == len(set(fired))
    runs = [f["invocation"] for f in _fires(project) if f["action"] == "run"]
    assert len(runs) == len(set(runs))


def _until_running(root: Path, invocation: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(root / ".ratui" / "ratui.db") as conn:
            found = conn.execute("SELECT status FROM runs WHERE invocation = ?", (invocation,)).fetchone()
        if found and found[0] == "running":
            return
        time.sleep(0.2)
    raise AssertionError(f"invocation {invocation} never ran")


def test_two_runners_started_at_once_one_holds_the_lease(project: Path, env):
    (project / "ratui.yaml").write_text((project / "ratui.yaml").read_text().replace(
        'cron: "* * * * *"}', 'cron: "* * * * *", enabled: false}'))
    runners = [Runner(project, env), Runner(project, env)]
    try:
        firsts = [r.wait_for(lambda e: e["event"] in ("lease", "waiting")) for r in runners]
        assert sorted(e["event"] for e in firsts) == ["lease", "waiting"]
        holder = runners[[e["event"] for e in firsts].index("lease")]
        waiting = firsts[[e["event"] for e in firsts].index("waiting")]
        assert waiting["holder_pid"] == holder.proc.pid
        # the holder stops (SIGTERM gives the lease up): the other takes over at its next loop
        holder.proc.send_signal(signal.SIGTERM)
        assert holder.proc.wait(timeout=60) == 0
        other = runners[1 - runners.index(holder)]
        other.wait_for(lambda e: e["event"] == "lease", timeout=30)
    finally:
        for runner in runners:
            if runner.proc.poll() is None:
                stop_group(runner.proc)


def test_sigterm_lets_a_run_in_flight_finish_within_the_grace(project: Path, env):
    runner = Runner(project, env, "--grace-seconds", "300")
    try:
        started = runner.wait_for(lambda e: e["event"] == "started")
        runner.proc.send_signal(signal.SIGTERM)
        assert runner.proc.wait(timeout=300) == 0
    finally:
        if runner.proc.poll() is None:
            stop_group(runner.proc)
    runner.wait_for(lambda e: e["event"] == "stopped")
    finished = [e for e in runner.events if e["event"] == "finished" and e["invocation"] == started["invocation"]]
    assert finished and finished[0]["not_succeeded"] == 0
    assert [r["status"] for r in _scheduled_runs(project) if r["invocation"] == started["invocation"]] == ["success"]


def test_a_fresh_health_token_is_kept_in_a_private_file_never_printed(tmp_path: Path, env: dict[str, str]):
    """Without RATUI_UP_TOKEN or --token, the runner makes a token, keeps it in .ratui/runner.token (0600) and prints
    only where it is: a runner's output goes to a journal or a container's log. The token opens /healthz; the file
    goes when the runner stops. (No schedule here: no run, no Spark.)"""
    root = init_project(tmp_path / "quiet", None)
    (root / "ratui.yaml").write_text("namespace: quiet\nrunner: {loop_seconds: 1}\n")
    env = {k: v for k, v in env.items() if k != "RATUI_UP_TOKEN"}
    runner = Runner(root, env)
    token_file = root / ".ratui" / "runner.token"
    try:
        said = runner.wait_for(lambda e: e.get("event") == "health", timeout=120)
        assert str(token_file) in said["message"]
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert runner.health({"Authorization": f"Bearer {token}"})[0] == 200
        assert runner.health({})[0] == 401
        runner.proc.send_signal(signal.SIGTERM)
        assert runner.proc.wait(60) == 0
        printed = [json.dumps(e) for e in runner.events]
        while (line := runner._lines.get(timeout=30)) is not None:  # the rest of what it printed, to its end
            printed.append(line)
    finally:
        stop_group(runner.proc)
    assert token not in "\n".join(printed)
    assert not token_file.exists()


def test_the_runner_serves_the_shells_commands_on_its_own_spark(tmp_path: Path, env: dict[str, str]):
    """With the warm engine on (a user's default), `ratui up` is the project's warm engine too: the shell's `ratui
    run` and `query` run in the runner's process on its Spark (no engine process of their own), recorded with the
    runner's pid and trigger `cli`, their output on their own terminal and none in the runner's; `ratui engine status`
    names the runner; `ratui engine stop` stops the serving and the runner goes on; SIGTERM ends it, exit 0, no
    socket left."""
    from tests.warm_engines import engine_pids, warm_engines

    root = init_project(tmp_path / "served", None)
    (root / "ratui.yaml").write_text("namespace: served\nspark:\n  master: local[1]\n  config:\n"
                                     "    spark.sql.shuffle.partitions: 1\nrunner: {loop_seconds: 1}\n")
    one = root / "served" / "pipelines" / "gold" / "numbers"
    one.mkdir(parents=True)
    (one / "pipeline.sql").write_text("-- @merge_strategy: full_refresh\nSELECT id FROM range(7)\n")
    engines = tmp_path / "engines"
    with warm_engines(engines) as warm:
        env = {**env, **warm}

        def ratui(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "ratui", *args, "--project", str(root)], env=env,
                                  capture_output=True, text=True, timeout=300)

        def status() -> dict | None:
            return json.loads(ratui("engine", "status", "--json").stdout)["engine"]

        runner = Runner(root, env)
        try:
            runner.wait_for(lambda e: e.get("event") == "shell" and "run in this runner" in e["message"])
            deadline = time.monotonic() + 60
            while (status() or {}).get("hosted_by") != "runner":
                assert time.monotonic() < deadline, f"the runner does not serve the shell: {status()}"
                time.sleep(0.3)
            assert status()["pid"] == runner.proc.pid and not status()["console"]
            assert "the runner (`ratui up`) serves the shell's commands" in ratui("engine", "status").stdout

            run = ratui("run", "gold.numbers", "--json")
            assert run.returncode == 0, run.stderr
            assert "warm engine" not in run.stderr  # nothing started: the runner's Spark ran it
            (result,) = [json.loads(line) for line in run.stdout.splitlines() if '"pipeline"' in line]
            assert result["status"] == "success" and result["rows_written"] == 7
            (latest,) = [json.loads(line) for line in ratui("runs", "--json", "--limit", "1").stdout.splitlines()]
            assert (latest["id"], latest["pid"], latest["trigger"]) == (result["run_id"], runner.proc.pid, "cli")
            query = ratui("query", "SELECT SUM(id) AS total FROM gold.numbers")
            assert query.returncode == 0 and "21" in query.stdout, query.stderr
            assert not engine_pids(engines)  # no engine process: the runner is the shell's engine
            assert status()["commands_served"] == 2

            stopped = ratui("engine", "stop")
            assert stopped.returncode == 0 and "no longer serves" in stopped.stdout and "goes on" in stopped.stdout
            assert runner.proc.poll() is None and runner.health()[0] == 200  # the runner goes on
            runner.proc.send_signal(signal.SIGTERM)
            assert runner.proc.wait(timeout=90) == 0
            runner.wait_for(lambda e: e["event"] == "stopped")
        finally:
            if runner.proc.poll() is None:
                stop_group(runner.proc)
        # the runner's own output is its events, never a served command's words
        assert all(e.get("event") != "text" for e in runner.events), [e for e in runner.events if e["event"] == "text"]
        assert not list(engines.glob("*.sock"))


def test_metrics_are_served_beside_healthz_behind_the_same_door(project: Path, env):
    """A Prometheus scrape of the runner's /metrics (parsed with prometheus_client's own parser): the runs it fired
    by pipeline, status and trigger, their durations as a histogram, rows written, the table's freshness age, the
    lease, the memory of its process and its JVM; refused without the token, or with another site's Origin."""
    from prometheus_client.parser import text_string_to_metric_families

    ticks = project / "p" / "pipelines" / "gold" / "ticks" / "pipeline.sql"
    ticks.write_text("-- @merge_strategy: full_refresh\n-- @freshness: 1h\nSELECT 1 AS one\n")
    runner = Runner(project, env)
    try:
        started = runner.wait_for(lambda e: e["event"] == "started")
        runner.wait_for(lambda e: e["event"] == "finished" and e["invocation"] == started["invocation"])

        def scrape(headers: dict[str, str]) -> tuple[int, str]:
            request = urllib.request.Request(f"http://127.0.0.1:{runner.port}/metrics", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert answer.headers["Content-Type"].startswith("text/plain")
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as refused:
                return refused.code, refused.read().decode()

        assert scrape({})[0] == 401
        assert scrape({"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"})[0] == 403
        code, text = scrape({"Authorization": f"Bearer {TOKEN}"})
        assert code == 200
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(sample)

        def value(name: str, **labels: str) -> float:
            found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
            assert found, f"no {name} {labels} in:\n{text}"
            return found[0]

        assert value("ratui_runs_total", pipeline="p.gold.ticks", status="success", trigger="schedule") >= 1
        assert value("ratui_run_duration_seconds_count", pipeline="p.gold.ticks") >= 1
        assert value("ratui_run_duration_seconds_sum", pipeline="p.gold.ticks") > 0
        assert value("ratui_rows_written_total", pipeline="p.gold.ticks") >= 1
        assert value("ratui_phase_duration_seconds_count", phase="write") >= 1
        assert 0 <= value("ratui_freshness_age_seconds", pipeline="p.gold.ticks") < 3600
        assert value("ratui_freshness_stale", pipeline="p.gold.ticks", state="fresh") == 0
        assert value("ratui_runner_holding_lease") == 1
        assert value("ratui_process_resident_bytes", process="python") > 0
        assert value("ratui_process_resident_bytes", process="jvm") > 0  # its Spark started for the fire
        assert TOKEN not in text
    finally:
        stop_group(runner.proc)
