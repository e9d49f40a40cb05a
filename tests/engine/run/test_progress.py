"""Live Spark progress of a run: while its build runs a long Spark job, SparkProgress events report the job's
tasks (done, running, total) from Spark's status tracker, and they stop when the run ends."""

from __future__ import annotations

from ratui.engine.events import PhaseFinished, PhaseStarted, RunFinished, SparkProgress
from ratui.engine.facade.engine import Engine

# 16 partitions of hashing: a few seconds on two cores, long enough for several half-second polls
SLOW = """\
-- @merge_strategy: full_refresh
SELECT CAST(count(*) AS BIGINT) AS n, sum(hash(id)) AS h FROM range(0, 300000000, 1, 16)
"""


def test_a_long_build_reports_its_tasks_as_they_finish(make_project, spark):
    root = make_project({"demo/pipelines/silver/slow/pipeline.sql": SLOW})
    engine = Engine.open(root)
    # polled five times as often as the console's half second: on a fast machine the job lasts about one second,
    # and two polls can both land before its first task finishes (CI saw [(0, 16), (0, 17)])
    engine._in_flight.progress._interval = 0.1
    events = []
    engine.subscribe(events.append)
    results = engine.run(engine.compile().select([]))
    assert [r.status for r in results] == ["success"]
    progress = [e for e in events if isinstance(e, SparkProgress)]
    running = [e for e in progress if e.jobs_running]
    assert running, "no progress reported while the build's job ran"
    sixteen = [e for e in running if e.tasks_total >= 16]
    assert sixteen, [(e.tasks_done, e.tasks_total) for e in running]  # the job's 16 tasks (and its final stage)
    # caught mid-job: some of its tasks done, not all (a phase may run several jobs: each starts again from 0)
    assert any(0 < e.tasks_done < e.tasks_total for e in sixteen), [(e.tasks_done, e.tasks_total) for e in sixteen]
    assert all(0 <= e.tasks_done <= e.tasks_total for e in running), running
    # reported while a phase ran, never after the run ended
    order = [type(e).__name__ for e in events]
    last_progress = max(i for i, e in enumerate(events) if isinstance(e, SparkProgress))
    assert last_progress < order.index("RunFinished")
    first = events.index(running[0])
    started = [e.phase for e in events[:first] if isinstance(e, PhaseStarted)]
    finished = [e.phase for e in events[:first] if isinstance(e, PhaseFinished)]
    assert started[-1] not in finished  # inside a running phase
    assert isinstance(events[-1], RunFinished)
    engine.close()
