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


def terminal_env(**extra: str) -> dict[str, str]:
    """This process's environment for tmux, less COLUMNS and LINES: a console reads its size from them before the
    terminal's (pytest-xdist's workers export COLUMNS=80 LINES=24, and a 160x48 pane drew an 80-column console)."""
    return {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "TERM": "xterm-256color",
            **extra}


def in_terminal(command: str) -> str:
    """`command` as tmux's pane runs it: without COLUMNS and LINES even where tmux's server has them (a server
    started by another test keeps the environment it started with)."""
    return f"env -u COLUMNS -u LINES {command}"


def capture(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                          check=True).stdout


def thread_dump(session: str, project: Path) -> str:
    """Where a console that seems stuck is: SIGUSR1 makes it write every thread's stack to console.log."""
    import signal

    import psutil

    pane = subprocess.run(["tmux", "display", "-p", "-t", session, "#{pane_pid}"], capture_output=True, text=True)
    try:
        shell = psutil.Process(int(pane.stdout.strip()))
        consoles = [p for p in [shell, *shell.children(recursive=True)] if "tui" in p.cmdline()]
        log = project / ".ratui" / "logs" / "console.log"
        before = log.stat().st_size if log.exists() else 0
        os.kill(consoles[-1].pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10  # faulthandler writes the dump at once: wait until the log has grown
        while (not log.exists() or log.stat().st_size == before) and time.monotonic() < deadline:
            time.sleep(0.1)
        return log.read_text()[-20000:]
    except (ValueError, IndexError, OSError, psutil.Error) as exc:
        return f"(no thread dump: {exc})"


def foreign_lines(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if any(word in line for word in FOREIGN)]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_run_a_pipeline_in_a_real_terminal(sample_copy: Path):
    binary = ratui_binary()
    assert binary, "the ratui command is not installed"
    session = f"ratui-e2e-{uuid.uuid4().hex[:8]}"
    env = terminal_env()
    command = in_terminal(f"{binary} tui --project {sample_copy}")
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
            assert time.monotonic() < deadline, \
                f"no success after {TIMEOUT}s:\n{screen}\n{thread_dump(session, sample_copy)}"
            time.sleep(0.5)
        # the finished run's view (a frame captured while the terminal was being redrawn may hold only part of it)
        screen = wait_screen(session, lambda s: all(part in s for part in (
            "rows written 5,000", "5 resolve", "merged run-", "Spark ready")), 20, frames, "the finished run's view")
        assert "✘ failed" not in screen

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


def wait_for_file(path: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.2)


def wait_screen(session: str, predicate, timeout: float, frames: list[str], what: str) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = capture(session)
        frames.append(screen)
        if predicate(screen):
            return screen
        assert time.monotonic() < deadline, f"{what} did not show within {timeout:.0f}s:\n{screen}"
        time.sleep(0.3)


def keys(session: str, *names: str) -> None:
    """Press keys one at a time. An Escape followed at once by a key would read as Alt+key: after each Escape, the
    next key waits until the screen has changed (the console handled the Escape; every Escape here closes a view)."""
    for name in names:
        before = capture(session) if name == "Escape" else None
        subprocess.run(["tmux", "send-keys", "-t", session, name], check=True)
        if before is not None:
            deadline = time.monotonic() + 30
            while capture(session) == before:
                assert time.monotonic() < deadline, f"Escape changed nothing within 30 s:\n{before}"
                time.sleep(0.1)


def jump_to(session: str, pipeline: str, frames: list[str]) -> None:
    """`:` and a pipeline's name: the jump field closes once the cursor is on it."""
    keys(session, ":")
    wait_screen(session, lambda s: "a screen · a pipeline" in s, 60, frames, "the jump field")
    subprocess.run(["tmux", "send-keys", "-t", session, "-l", pipeline], check=True)
    keys(session, "Enter")
    wait_screen(session, lambda s: "a screen · a pipeline" not in s, 60, frames, f"the jump to {pipeline}")


# what each screen's footer must carry whole at 80 columns (the keys to act, and w, : and ? everywhere)
FOOTERS = {
    "1": ("r Run", "+ Downstream", "c Stop", "e Edit", "w Watch", ": Jump", "? Help"),
    "2": ("/ Filter", "R Re-run", "w Watch", ": Jump", "? Help"),
    "3": ("s SQL", "o Open run", "w Watch", ": Jump", "? Help"),
    "4": ("n New", "s Switch", "m Merge", "d Delete", "l Log", "i REST", "z Undo", "w Watch", ": Jump", "? Help"),
    "5": ("u Reset file", "U Reset zone", "w Watch", ": Jump", "? Help"),
    "6": ("p Preview", "x Run now", "w Watch", ": Jump", "? Help"),
    "8": ("r Run", "u Upstream", "d Downstream", "w Watch", ": Jump", "? Help"),
    "9": ("l Level", "/ Search", "f Follow", "w Watch", ": Jump", "? Help"),
    "0": ("p Pause/resume", "w Watch", ": Jump", "? Help"),
}


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_at_80x24_run_cancel_edit_and_read_every_screen(sample_copy: Path, tmp_path: Path):
    binary = ratui_binary()
    assert binary, "the ratui command is not installed"
    editor = tmp_path / "editor.sh"  # an "editor" that appends a comment to the file it is given, then exits
    editor.write_text("#!/bin/sh\nprintf -- '-- touched by the editor\\n' >> \"$1\"\n")
    editor.chmod(0o755)
    session = f"ratui-e2e-{uuid.uuid4().hex[:8]}"
    env = terminal_env(EDITOR=str(editor), VISUAL="")
    # raw_orders's run is held before its quality phase until the test opens the gate (ratui/engine/failpoints.py):
    # it is still running when c is pressed, however fast a warm run is
    gate = tmp_path / "gate"
    hold = f"RATUI_FAILPOINT=hold:quality:ecommerce.bronze.raw_orders RATUI_FAILPOINT_GATE={gate}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24",
                    in_terminal(f"{hold} {binary} tui --project {sample_copy}")], check=True, env=env)
    frames: list[str] = []
    try:
        wait_screen(session, lambda s: "raw_customers" in s, 120, frames, "the console")

        # run the first pipeline; its detail fits: head, phases, log and the footer's keys
        keys(session, "r")
        screen = wait_screen(session, lambda s: "✔ success" in s, TIMEOUT, frames, "a successful run")
        assert "? Help" in screen.splitlines()[-1] and "R Re-run" in screen.splitlines()[-1]

        # run raw_orders and stop it: the question says what each answer does
        keys(session, "Escape")
        wait_screen(session, lambda s: "✔ raw_customers" in s, 60, frames, "the tree")
        jump_to(session, "raw_orders", frames)  # by name: arrow keys sent while the screen changes can be lost
        keys(session, "F")
        wait_screen(session, lambda s: "ecommerce.bronze.raw_orders   ● running" in s, 60, frames,
                    "raw_orders running")
        wait_for_file(Path(f"{gate}.reached"), TIMEOUT, "raw_orders held before its quality phase")
        keys(session, "c")
        wait_screen(session, lambda s: "Stop the run (y)" in s and "Keep it running (n)" in s, 60, frames,
                    "the stop question")
        keys(session, "y")
        wait_screen(session, lambda s: "Cancelling run" in s, 60, frames, "the cancel requested")
        gate.touch()  # on it goes, to the checkpoint where the cancel waits for it
        wait_screen(session, lambda s: "■ cancelled" in s, 60, frames, "the cancelled run")

        # every screen, and the help: whole labels, the keys everyone needs on the footer
        keys(session, "Escape")
        for key, labels in FOOTERS.items():
            keys(session, key)
            screen = wait_screen(session, lambda s, ls=labels: all(label in s.splitlines()[-1] for label in ls),
                                 60, frames, f"screen {key}'s footer")
            top = screen.splitlines()[0]
            assert all(title in top for title in ("Pipelines", "Quality", "Logs", "Schedules"))  # every tab, whole
        keys(session, "?")
        screen = wait_screen(session, lambda s: "ratui keys" in s and "Everywhere" in s, 60, frames, "the help")
        keys(session, "Escape", "1")

        # e opens the selected pipeline's file in $EDITOR and the console comes back, reloaded
        wait_screen(session, lambda s: "✔ raw_customers" in s, 60, frames, "the tree")
        jump_to(session, "raw_customers", frames)
        keys(session, "e")
        pipeline_sql = sample_copy / "ecommerce/pipelines/bronze/raw_customers/pipeline.sql"
        deadline = time.monotonic() + 60
        while "touched by the editor" not in pipeline_sql.read_text():
            assert time.monotonic() < deadline, "the editor was not started on the pipeline's file"
            time.sleep(0.3)
        wait_screen(session, lambda s: "✔ raw_customers" in s and "? Help" in s.splitlines()[-1], 60, frames,
                    "the console back from the editor")

        # the Logs screen (9) shows spark.log on purpose: only stray output anywhere else is a leak
        stray = [line for frame in frames if "9 Logs" not in frame.splitlines()[0]  # lit: "9 Logs", else "9Logs"
                 for line in foreign_lines(frame)]
        assert not stray, "Spark/Java output reached the screen:\n" + "\n".join(stray[:20])
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_at_80x24_break_fix_run_leaves_no_stale_failure(sample_copy: Path, tmp_path: Path):
    """Break a pipeline in $EDITOR, run it (it fails: ✘), put it back as it was, run it again: the run is skipped
    (nothing changed since its last good run) and the tree shows that good run: no ✘ left on the screen."""
    binary = ratui_binary()
    assert binary, "the ratui command is not installed"
    sql = sample_copy / "ecommerce/pipelines/silver/clean_customers/pipeline.sql"
    good = sql.read_text()
    bad = good.replace("CAST(customer_id AS INT) AS customer_id", "CAST(email AS INT) AS customer_id")
    assert bad != good
    staged = tmp_path / "next.sql"  # what the "editor" writes into the file it is given
    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\ncp {staged} \"$1\"\n")
    editor.chmod(0o755)
    session = f"ratui-e2e-{uuid.uuid4().hex[:8]}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24",
                    in_terminal(f"{binary} tui --project {sample_copy}")], check=True,
                   env=terminal_env(EDITOR=str(editor), VISUAL=""))
    frames: list[str] = []

    def good_state(screen: str, name: str) -> bool:  # passed, or passed with a quality warning (the sample's has one)
        return f"✔ {name}" in screen or f"▲ {name}" in screen

    def edit(text: str) -> None:
        staged.write_text(text)
        keys(session, "e")
        deadline = time.monotonic() + 60
        while sql.read_text() != text:
            assert time.monotonic() < deadline, "the editor was not started on the pipeline's file"
            time.sleep(0.2)
        wait_screen(session, lambda s: "? Help" in s.splitlines()[-1], 60, frames, "the console back from the editor")

    try:
        wait_screen(session, lambda s: "raw_customers" in s, 120, frames, "the console")
        for name in ("raw_customers", "clean_customers"):  # clean_customers and what it reads: a good run each
            jump_to(session, name, frames)
            keys(session, "r")
            wait_screen(session, lambda s, n=name: f"ecommerce.bronze.{n}" in s or f"ecommerce.silver.{n}" in s,
                        60, frames, f"{name}'s run")
            wait_screen(session, lambda s: "✔ success" in s or "▲ success" in s, TIMEOUT, frames, f"{name}'s good run")
            keys(session, "Escape")
            wait_screen(session, lambda s, n=name: good_state(s, n), 60, frames, "the tree")

        # break it and run it: the run fails, the tree says so
        edit(bad)
        keys(session, "r")
        wait_screen(session, lambda s: "✘ failed" in s, TIMEOUT, frames, "the failed run")
        keys(session, "Escape")
        screen = wait_screen(session, lambda s: "✘ clean_customers" in s, 60, frames, "the failure in the tree")

        # fix it back to the version of its last good run, and run: nothing to run, and no ✘ anywhere
        edit(good)
        keys(session, "r")
        wait_screen(session, lambda s: "skipped: unchanged since run" in s, 60, frames, "the skipped run")
        keys(session, "Escape")
        screen = wait_screen(session, lambda s: good_state(s, "clean_customers"), 60, frames, "the good state")
        tree = "\n".join(screen.splitlines()[1:-2])
        assert "✘" not in tree, f"a stale failure:\n{screen}"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
