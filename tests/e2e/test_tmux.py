"""End to end: the installed `ratui` in a real terminal (tmux) on a copy of the sample project.

Runs a bronze pipeline with keys, reads the screen with `tmux capture-pane` until the run shows success, and
checks that no Spark or Java output ever reaches the screen (Textual draws on the terminal; one stray log line
from the JVM would corrupt it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

TIMEOUT = 180  # Spark's cold start plus one run, on a shared 2-core machine
FOREIGN = ("WARN ", "WARNING:", "log4j", "SLF4J", "SparkContext", "SparkSession", "Exception", "at org.",
           "at java.", "Py4J", "py4j", "NativeCodeLoader", "Setting default log level", "Traceback")


def ratui_binary() -> str | None:
    # the script installed beside this interpreter first: the install under test, even if another is on PATH
    beside = Path(sys.executable).parent / "ratui"
    return str(beside) if beside.exists() else shutil.which("ratui")


def capture(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                          check=True).stdout


def foreign_lines(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if any(word in line for word in FOREIGN)]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_run_a_pipeline_in_a_real_terminal(sample_copy: Path):
    binary = ratui_binary()
    assert binary, "the ratui command is not installed"
    session = f"ratui-e2e-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "TERM": "xterm-256color"}
    command = f"{binary} tui --project {sample_copy}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command], check=True,
                   env=env)
    frames: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while "raw_customers" not in (screen := capture(session)):
            frames.append(screen)
            assert time.monotonic() < deadline, f"the console did not open:\n{screen}"
            time.sleep(0.3)
        frames.append(screen)
        assert "Pipelines" in screen and "bronze (4)" in screen
        # usable before Spark has started: the tree is up while the status line says Spark is (not yet) starting
        assert any("Spark starting" in f or "Spark not started" in f for f in frames), screen

        # the cursor starts on the first pipeline in run order: bronze.raw_customers; r runs it
        subprocess.run(["tmux", "send-keys", "-t", session, "r"], check=True)
        deadline = time.monotonic() + TIMEOUT
        while True:
            screen = capture(session)
            frames.append(screen)
            if "ecommerce.bronze.raw_customers" in screen and "✔ success" in screen:
                break
            assert "✘ failed" not in screen, f"the run failed:\n{screen}"
            assert time.monotonic() < deadline, f"no success after {TIMEOUT}s:\n{screen}"
            time.sleep(0.5)
        assert "rows written 5,000" in screen
        assert "5 resolve" in screen and "merged run-" in screen
        assert "Spark ready" in screen

        # back to the tree: the pipeline's last status is there
        subprocess.run(["tmux", "send-keys", "-t", session, "Escape"], check=True)
        deadline = time.monotonic() + 20
        while "✔ raw_customers" not in (screen := capture(session)):
            assert time.monotonic() < deadline, screen
            time.sleep(0.3)
        frames.append(screen)

        stray = [line for frame in frames for line in foreign_lines(frame)]
        assert not stray, "Spark/Java output reached the screen:\n" + "\n".join(stray[:20])
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
