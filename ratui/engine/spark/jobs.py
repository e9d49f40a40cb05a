"""A run's Spark work: its own session, its jobs tagged with the run, cancelled and followed from any thread.

Runs share the process's Spark (session.py) but each gets `new_run_session()`: its own temp views and SQL settings.
With a JVM of our own (local, cluster) a run also gets its own FAIR scheduler pool and a job group named after the
run, set in the run's thread, which `cancel_run()` cancels from any thread through the SparkContext. On Connect a
run's session is a server-side session of its own (`newSession()`), its thread's operations carry the run's tag
(`addTag`), `cancel_run()` interrupts that tag on that session from any thread (`interruptTag`), and `end_run()`
releases the session. Nothing here calls `sparkContext` when the session is remote. What a run's jobs are doing
(`progress()`) comes from Spark's status tracker, or on Connect from the server's progress reports.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ratui.engine.project.settings import Settings
from ratui.engine.spark.session import RUNTIME

log = logging.getLogger("ratui.spark")


def new_run_session(settings: Settings, run_id: str):
    """A session for one run: isolated temp views, shared context. Call from the thread that runs the jobs."""
    root = RUNTIME.get_spark(settings)
    session = RUNTIME.fresh(root)
    # a malformed CSV row is found whatever columns the query reads (landing/reader.py)
    session.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
    # a cached batch (a merge reads it two or three times) gets adaptive execution's coalesced partitions too:
    # a 100-row batch is not scanned as spark.sql.shuffle.partitions tasks every time
    session.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    RUNTIME.reach_buckets(session, settings)
    bind_thread(session, run_id)
    return session


def run_tag(run_id: str) -> str:
    """The Spark job tag of a run's operations (Spark Connect)."""
    return f"ratui-run-{run_id}"


def bind_thread(session, run_id: str) -> None:
    """Tag this thread's Spark jobs with the run, so cancel_run() can interrupt them from any thread."""
    # a pipeline or a query: this JVM may write the class archive (SparkRuntime._no_archive_of_an_idle_jvm)
    RUNTIME.did_work = True
    if RUNTIME.remote_url is not None:
        # Connect: tags are per thread of the client; the server interrupts a tag within one session
        session.addTag(run_tag(run_id))
        with RUNTIME.sessions_lock:
            sessions = RUNTIME.run_sessions.setdefault(run_id, [])
            known = any(s is session for s in sessions)
            if not known:
                sessions.append(session)
        if not known:
            try:  # the server's progress reports of this session's operations (progress())
                session.registerProgressHandler(_remote_progress_handler(run_id))
            except Exception:  # a client without progress reports: no live bar, the run goes on
                log.debug("no Spark Connect progress handler", exc_info=True)
        return
    sc = session.sparkContext
    sc.setJobGroup(run_id, f"ratui run {run_id}", interruptOnCancel=True)
    sc.setLocalProperty("spark.scheduler.pool", f"run-{run_id}")


def cancel_run(run_id: str) -> None:
    """Interrupt the run's running Spark jobs (from any thread)."""
    root = RUNTIME.session
    if root is None:
        return
    if RUNTIME.remote_url is not None:
        with RUNTIME.sessions_lock:
            sessions = list(RUNTIME.run_sessions.get(run_id, ()))
        for session in sessions:
            try:
                session.interruptTag(run_tag(run_id))
            except Exception:  # the run's session already released: nothing runs there
                log.debug("interrupting %s failed", run_id, exc_info=True)
        return
    root.sparkContext.cancelJobGroup(run_id)


def end_run(run_id: str) -> None:
    """The run ended: its Connect sessions are released (their server-side state, temp views and cached batches
    go). Nothing to do on a JVM of our own."""
    with RUNTIME.sessions_lock:
        sessions = RUNTIME.run_sessions.pop(run_id, [])
        RUNTIME.remote_progress.pop(run_id, None)
        RUNTIME.remote_jobs_done.pop(run_id, None)
    for session in sessions:
        RUNTIME.release(session)


def progress(run_id: str) -> dict[str, Any] | None:
    """What the run's (or query's) Spark jobs are doing now: jobs done, the running jobs' stages and tasks (done,
    running, total), as SparkProgress's fields; None when Spark is not up or nothing of the run has started. Never
    starts Spark. From Spark's status tracker (job group = run id) or, on Spark Connect, the server's progress
    reports."""
    root = RUNTIME.session
    if root is None:
        return None
    if RUNTIME.remote_url is not None:
        with RUNTIME.sessions_lock:
            latest = RUNTIME.remote_progress.get(run_id)
            done = RUNTIME.remote_jobs_done.get(run_id, 0)
        if latest is None:
            return None if not done else _progress_fields(done, 0, 0, 0, 0, 0, 0, None)
        return dict(latest, jobs_done=done)
    tracker = root.sparkContext.statusTracker()
    jobs_done = jobs_running = stages_done = stages_total = tasks_done = tasks_running = tasks_total = 0
    job_ids = tracker.getJobIdsForGroup(run_id)
    if not job_ids:
        return None
    for job_id in job_ids:
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        if job.status == "SUCCEEDED":
            jobs_done += 1
            continue
        if job.status != "RUNNING":
            continue
        jobs_running += 1
        for stage_id in job.stageIds:
            stages_total += 1
            stage = tracker.getStageInfo(stage_id)
            if stage is None:  # not submitted yet (or skipped: its output was there already)
                continue
            tasks_total += stage.numTasks
            tasks_done += stage.numCompletedTasks
            tasks_running += stage.numActiveTasks
            if stage.numTasks and stage.numCompletedTasks >= stage.numTasks:
                stages_done += 1
    return _progress_fields(jobs_done, jobs_running, stages_done, stages_total, tasks_done, tasks_running,
                            tasks_total, None)


def _progress_fields(jobs_done, jobs_running, stages_done, stages_total, tasks_done, tasks_running, tasks_total,
                     bytes_read) -> dict[str, Any]:
    return {"jobs_done": jobs_done, "jobs_running": jobs_running, "stages_done": stages_done,
            "stages_total": stages_total, "tasks_done": tasks_done, "tasks_running": tasks_running,
            "tasks_total": tasks_total, "bytes_read": bytes_read}


def _remote_progress_handler(run_id: str) -> Callable[..., None]:
    def handler(stages, inflight_tasks, operation_id, done, **_ignored) -> None:
        stages = list(stages or ())
        report = _progress_fields(0, 0 if done else 1, sum(1 for s in stages if s.done), len(stages),
                                  sum(s.num_completed_tasks for s in stages), inflight_tasks,
                                  sum(s.num_tasks for s in stages), sum(s.num_bytes_read for s in stages))
        with RUNTIME.sessions_lock:
            if done:
                RUNTIME.remote_progress.pop(run_id, None)
                RUNTIME.remote_jobs_done[run_id] = RUNTIME.remote_jobs_done.get(run_id, 0) + 1
            else:
                RUNTIME.remote_progress[run_id] = report

    return handler
