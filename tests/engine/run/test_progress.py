"""Live Spark progress of a run: while it runs a Spark job, SparkProgress events report the job's tasks (done,
running, total) from Spark's status tracker, and they stop when the run ends."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from ratui.engine.events import PhaseFinished, PhaseStarted, RunFinished, SparkProgress
from ratui.engine.facade.engine import Engine
from tests.servers import make_slow_project


def test_a_long_build_reports_its_tasks_as_they_finish(spark, tmp_path):
    # 16 tasks: the first 8 end at once, the last 8 wait at a gate (tests/servers.py) that this test opens only once
    # a report has caught the job mid-way (some tasks done, not all): there is no pace to guess
    project = make_slow_project(tmp_path / "slow", rows=16, parts=16)
    project.set(version=1, delay=0, gated=8)
    engine = Engine.open(project.root)
    engine._in_flight.progress._interval = 0.1
    events = []
    mid_job = threading.Event()

    def listen(event) -> None:
        events.append(event)
        if isinstance(event, SparkProgress) and event.jobs_running and event.tasks_total >= 16 \
                and 0 < event.tasks_done < event.tasks_total:
            mid_job.set()
            project.release()

    engine.subscribe(listen)
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(results=engine.run(engine.compile().select(["slow"]))))
    runner.start()
    caught = mid_job.wait(180)
    project.release()  # (if no report came, the run still ends, and the assertions below say what was missing)
    runner.join(180)
    assert caught, [(e.tasks_done, e.tasks_total) for e in events if isinstance(e, SparkProgress)]
    results = box["results"]
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
    # the run's jobs ran in a scheduler pool of its own, made on first use: Spark's log (the Logs screen) says
    # nothing about it (it used to warn once per run that the pool had no configuration)
    log = spark_log(spark)
    assert log.is_file() and "FairSchedulableBuilder" not in log.read_text(errors="replace")


def spark_log(spark) -> Path:
    """The file this process's JVM logs to: named in the log4j2 configuration its Java options point at."""
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    config = Path(re.search(r"-Dlog4j2\.configurationFile=file:(\S+)", options).group(1))
    return Path(re.search(r"appender\.file\.fileName = (.+)", config.read_text()).group(1).strip())
