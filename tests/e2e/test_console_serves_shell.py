"""End to end: a console open on a project serves the shell's commands (ratui/warm/hosted.py).

The installed `ratui` opens the console in a real terminal (a tmux server of the test's own, started with the
test's environment, so the console and the shell's commands come from one environment as in two tabs of one
terminal); the shell's `ratui run`, `query` and `watch` then run in the console's process on its warm Spark, with
no engine process of their own, and their runs show in the console live. A command from another environment gets an
engine of its own, and the console serves again once that engine has ended. Quitting the console with a shell command
in flight asks first, then stops that command as Ctrl-C would; its words never reach the console's terminal, and
the console leaves no socket and no process behind.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.test_tmux import FOREIGN, TIMEOUT, foreign_lines, in_terminal, ratui_binary, terminal_env
from tests.warm_engines import engine_pids, warm_engines

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Terminal:
    """A tmux server of the test's own with one pane."""

    def __init__(self, env: dict[str, str], command: str) -> None:
        self.tmux = ["tmux", "-L", f"ratui-serves-{uuid.uuid4().hex[:8]}"]
        self.frames: list[str] = []
        subprocess.run([*self.tmux, "new-session", "-d", "-s", "c", "-x", "160", "-y", "48", command], check=True,
                       env=env)

    def screen(self) -> str:
        text = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", "c"], capture_output=True, text=True,
                              check=True).stdout
        self.frames.append(text)
        return text

    def wait(self, predicate, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while not predicate(screen := self.screen()):
            assert time.monotonic() < deadline, f"{what} did not show within {timeout:.0f} s:\n{screen}"
            time.sleep(0.3)
        return screen

    def keys(self, *names: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "c", *names], check=True)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.2)
    return value


def test_the_console_serves_the_shells_commands_and_quitting_stops_them(sample_copy: Path, tmp_path: Path):
    binary = ratui_binary()
    assert binary, "the ratui command is not installed"
    engines = tmp_path / "engines"
    with warm_engines(engines) as warm:
        env = terminal_env(**warm)

        def ratui(*args: str, timeout: float = TIMEOUT, more: dict | None = None) -> subprocess.CompletedProcess:
            return subprocess.run([binary, *args], env={**env, **(more or {})}, cwd=sample_copy,
                                  capture_output=True, text=True, timeout=timeout)

        def status() -> dict | None:
            return json.loads(ratui("engine", "status", "--json").stdout)["engine"]

        terminal = Terminal(env, in_terminal(f"{binary} tui --project {sample_copy}; echo CONSOLE-EXITED $?; "
                                             "sleep 600"))
        try:
            terminal.wait(lambda s: "serving the shell: 0 cmds" in s, TIMEOUT, "the console serving the shell")
            engine = status()
            assert engine["console"] is True and engine["commands_served"] == 0
            console = engine["pid"]
            assert not engine_pids(engines)  # no engine process: the console's own is the shell's

            run = ratui("run", "bronze.raw_customers", "--force", "--json")
            assert run.returncode == 0, run.stderr
            assert "warm engine" not in run.stderr  # nothing started, nothing replaced
            (result,) = [json.loads(line) for line in run.stdout.splitlines() if '"pipeline"' in line]
            with (sample_copy / "ecommerce/landing/customers/customers.csv").open(newline="") as fh:
                customers = sum(1 for _ in csv.DictReader(fh))
            assert result["status"] == "success" and result["rows_written"] == customers
            (latest,) = [json.loads(line) for line in ratui("runs", "--json", "--limit", "1").stdout.splitlines()]
            assert latest["id"] == result["run_id"] and latest["pid"] == console and latest["trigger"] == "cli"
            # the console shows the shell's run as its own: in the tree, and on its status line
            terminal.wait(lambda s: "✔ raw_customers" in s and "serving the shell: 1 cmd" in s, 60,
                          "the shell's run in the console")

            query = ratui("query", "SELECT COUNT(*) AS n FROM bronze.raw_customers")
            assert query.returncode == 0, query.stderr
            assert str(customers) in query.stdout and status()["commands_served"] == 2
            assert not engine_pids(engines)

            # a command from another environment hands the serving to an engine of its own, said once (the
            # variable's name, never its value); the console serves again once that engine has ended
            moved = ratui("query", "SELECT COUNT(*) AS n FROM bronze.raw_customers",
                          more={"RATUI_TEST_OTHER_SHELL": "other-value"})
            assert moved.returncode == 0, moved.stderr
            assert str(customers) in moved.stdout
            assert "replaced" in moved.stderr and "RATUI_TEST_OTHER_SHELL" in moved.stderr
            assert "other-value" not in moved.stderr + moved.stdout
            wait_for(lambda: engine_pids(engines), 60, "the other environment's engine")
            assert ratui("engine", "stop").returncode == 0
            wait_for(lambda: not engine_pids(engines), 90, "the other environment's engine gone")
            wait_for(lambda: (status() or {}).get("console"), 60, "the console serving the shell again")

            # `ratui watch` runs here; quitting the console asks, then stops it as Ctrl-C would
            watch = subprocess.Popen([binary, "watch"], env=env, cwd=sample_copy, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            try:
                wait_for(lambda: any(c["argv"] == ["watch"] for c in (status() or {}).get("running", [])), 60,
                         "the watch served by the console")
                terminal.keys("C-q")
                terminal.wait(lambda s: "Quit ratui?" in s and "ratui watch" in s, 30, "the question on quitting")
                terminal.keys("y")
                out, err = watch.communicate(timeout=60)
            finally:
                if watch.poll() is None:
                    watch.kill()
            assert watch.returncode == 0, err
            assert out.startswith("watching ") and "stopping" in out  # its words reached its own terminal
            screen = terminal.wait(lambda s: "CONSOLE-EXITED" in s, 60, "the console's end")
            assert "CONSOLE-EXITED 0" in screen
            assert "watching" not in screen and "stopping" not in screen  # and never the console's

            # nothing left: no socket, no process; the next command starts an engine of its own
            assert status() is None and not list(engines.glob("*.sock"))
            wait_for(lambda: not _alive(console), 30, "the console's process gone")
            stray = [line for frame in terminal.frames for line in foreign_lines(frame)]
            assert not stray, f"Spark/Java output ({FOREIGN}) reached the console:\n" + "\n".join(stray[:20])
        finally:
            terminal.close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
