"""Spark started on the side (session.start_soon, used by `ratui run` as soon as its first pipeline is known to
run): the run's own get_spark() waits for it, and a start that fails there is reported once, not tried twice."""

from __future__ import annotations

import threading

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import load_settings
from ratui.engine.spark import session


@pytest.fixture
def no_spark_yet(monkeypatch):
    """A process whose Spark has not started (this test process's own shared session is set aside meanwhile)."""
    for name, value in (("session", None), ("soon", None), ("soon_failed", None), ("refused", None),
                        ("wanted", False)):
        monkeypatch.setattr(session.RUNTIME, name, value)


def test_a_failed_start_on_the_side_fails_the_runs_get_spark_once_then_it_tries_again(no_spark_yet, monkeypatch,
                                                                                      make_project):
    settings = load_settings(make_project({}))
    attempts = []
    release, entered = threading.Event(), threading.Event()

    def failing_start(s):
        attempts.append(threading.current_thread().name)
        entered.set()
        release.wait(5)
        raise RatuiError("RAT-SPK-001", "Spark master spark://127.0.0.1:9 is not reachable")

    monkeypatch.setattr(session.RUNTIME, "_start", failing_start)
    session.start_soon(settings)
    session.start_soon(settings)  # asked again: still one start
    # the side thread is inside its start (a busy machine may schedule it late: the run's own call would then take
    # the start itself, which is fine, but not what this test is about)
    assert entered.wait(10)
    release.set()
    with pytest.raises(RatuiError) as first:
        session.get_spark(settings)  # waits for the side start, then gets its failure
    assert first.value.code == "RAT-SPK-001"
    assert attempts == ["ratui-spark-start"]
    with pytest.raises(RatuiError):
        session.get_spark(settings)  # a later call (the next pipeline) tries again
    assert attempts == ["ratui-spark-start", threading.current_thread().name]
    session.RUNTIME.soon.join(30)  # ended: nothing of this test is left to start a JVM after it
    assert not session.RUNTIME.soon.is_alive()


def test_the_run_gets_the_session_the_side_started(no_spark_yet, monkeypatch, make_project):
    settings = load_settings(make_project({}))
    started = []
    monkeypatch.setattr(session.RUNTIME, "_start", lambda s: started.append(1) or "a session")
    session.start_soon(settings)
    assert session.get_spark(settings) == "a session"
    # the side thread ends once it finds the session (were it left running, it could start a real JVM after this
    # test, once the session is put back to what it was)
    session.RUNTIME.soon.join(30)
    assert not session.RUNTIME.soon.is_alive()
    assert started == [1]


def test_a_jvm_started_on_the_side_that_no_run_used_writes_no_class_archive(make_project, tmp_path):
    """A run that fails or is interrupted before it needs Spark (its first pipeline's start-up, Ctrl+C): the JVM
    booted on the side is killed at exit. Left to end by itself it would, as the machine's first JVM, write the
    class archive of a JVM that did no work, and every later start would map that."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = make_project({})
    cache = tmp_path / "cache"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), RATUI_JVM_ARCHIVE="1")
    script = ("import sys, time; from pathlib import Path; from ratui.engine.project.settings import load_settings;"
              "from ratui.engine.spark import class_archive, session;"
              "session.start_soon(load_settings(Path(sys.argv[1])));"
              "deadline = time.monotonic() + 120\n"
              "while session.RUNTIME.session is None and time.monotonic() < deadline: time.sleep(0.1)\n"
              "print('up' if session.RUNTIME.session is not None else 'not up', class_archive.writing is not None)")
    proc = subprocess.run([sys.executable, "-c", script, str(root)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout.strip() == "up True", proc.stderr[-2000:]  # up, and the one to write the archive
    folder = cache / "ratui" / "jvm"
    _jvm_gone(cache)  # killed at once; left alone it would end within seconds, having written its archive
    assert not list(folder.glob("*.part")) and not list(folder.glob("*.claim"))  # the next JVM writes it


def _jvm_gone(cache, limit: float = 30.0) -> None:
    """Wait until no process started for this cache folder (its JVM writes the archive there) is left."""
    import time

    import psutil

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        alive = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if any(str(cache) in part for part in proc.info["cmdline"] or []):
                    alive.append(proc)
            except psutil.Error:
                pass
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"a JVM of {cache} is still running after {limit} s")


def test_a_jvm_that_ran_nothing_writes_no_class_archive(make_project, tmp_path):
    """The first JVM of an installation writes the class archive as it exits. A console opened and closed
    without a run would write one of Spark's start alone (about half the classes a run needs), and every later
    cold start would map it, 1.4 s slower: that JVM is killed at exit and its claim goes, so the next JVM that runs
    something writes the archive (test_class_archive.py: a JVM that ran a job writes it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = make_project({})
    cache = tmp_path / "cache"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), RATUI_JVM_ARCHIVE="1")
    script = ("import sys; from pathlib import Path; from ratui.engine.project.settings import load_settings;"
              "from ratui.engine.spark import session; session.get_spark(load_settings(Path(sys.argv[1])));"
              "from ratui.engine.spark import class_archive; print(class_archive.writing is not None)")
    proc = subprocess.run([sys.executable, "-c", script, str(root)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr[-2000:]  # the archive's writer
    _jvm_gone(cache)  # killed at once; left alone it would end within seconds, having written its archive
    folder = cache / "ratui" / "jvm"
    assert not list(folder.glob("*.part")) and not list(folder.glob("*.claim"))
