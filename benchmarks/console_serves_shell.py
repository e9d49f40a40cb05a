"""The shell's commands served by an open console (ratui/warm/hosted.py), beside the same commands served by the
warm engine alone, in one run of this script on a fresh copy of the sample project.

    python benchmarks/console_serves_shell.py [--rounds 5]

What it prints, each figure beside its reference from the same sitting:

  run     `ratui run bronze.raw_customers --force` from the shell, whole command, median of the 2nd to last round:
          served by a console open in a terminal (tmux, 160x48), beside the warm engine alone (no console)
  query   `ratui query "SELECT COUNT(*) FROM silver.clean_orders"`, second time, the same two ways
  who     who served the commands while the console was open, and the Java processes under it and elsewhere

Needs tmux. Timings are wall-clock, printed, never asserted. Check `uptime` first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from interactive import fresh_copy  # noqa: E402
from warm_engine import PIPELINE, QUERY, RATUI, median_after_first, shell  # noqa: E402


def served_by(project: Path, env: dict) -> str:
    """Who served the shell's commands (`ratui engine status --json`), and the Java processes under it and elsewhere."""
    import json

    import psutil

    status = json.loads(subprocess.run([RATUI, "engine", "status", "--json", "--project", str(project)],
                                       capture_output=True, text=True, env=env, check=True).stdout)["engine"] or {}
    javas = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "java"]
    under = {c.pid for c in psutil.Process(status["pid"]).children(recursive=True)} if status.get("pid") else set()
    mine = sum(1 for p in javas if p.pid in under)
    return (f"{'a console' if status.get('console') else 'an engine'} (pid {status.get('pid')}), "
            f"{status.get('commands_served')} commands served; Java processes: {mine} under it, "
            f"{len(javas) - mine} elsewhere on the machine")


def screen(tmux: list[str]) -> str:
    return subprocess.run([*tmux, "capture-pane", "-p", "-t", "c"], capture_output=True, text=True).stdout


def wait_screen(tmux: list[str], words: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while words not in screen(tmux):
        if time.monotonic() > deadline:
            raise SystemExit(f"the console did not show {words!r} within {timeout:.0f} s:\n{screen(tmux)}")
        time.sleep(0.3)


def measure(project: Path, env: dict, rounds: int) -> tuple[float, float]:
    runs = [shell(project, "run", PIPELINE, "--force", env=env) for _ in range(rounds)]
    query = [shell(project, "query", QUERY, env=env) for _ in range(2)][1]
    return median_after_first(runs), query


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    print(f"uptime: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    base = Path(tempfile.mkdtemp(prefix="ratui-serves-bench-"))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(RATUI_ENGINE_DIR=str(base / "engines"), RATUI_WARM="1", TERM="xterm-256color")
    tmux = ["tmux", "-L", f"ratui-bench-{uuid.uuid4().hex[:8]}"]
    try:
        project = fresh_copy(base, "sample")
        shell(project, "run", "--no-warm", env=env)  # every table built once

        subprocess.run([*tmux, "new-session", "-d", "-s", "c", "-x", "160", "-y", "48",
                        f"{RATUI} tui --project {project}"], env=env, check=True)
        wait_screen(tmux, "serving the shell", 180)
        served_run, served_query = measure(project, env, options.rounds)
        served = served_by(project, env)
        subprocess.run([*tmux, "send-keys", "-t", "c", "C-q"], check=True)
        deadline = time.monotonic() + 60
        while subprocess.run([*tmux, "has-session", "-t", "c"], capture_output=True).returncode == 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"the console did not quit:\n{screen(tmux)}")
            time.sleep(0.3)

        subprocess.run([RATUI, "engine", "start", "--project", str(project)], env=env, check=True,
                       capture_output=True)
        alone_run, alone_query = measure(project, env, options.rounds)

        print(f"\n`ratui run {PIPELINE} --force`, whole command, median of rounds 2-{options.rounds}")
        print(f"  served by the open console  {served_run:6.2f} s")
        print(f"  warm engine alone           {alone_run:6.2f} s   console/engine {served_run / alone_run:.2f}x")
        print(f"\n`ratui query \"{QUERY}\"`, second time")
        print(f"  served by the open console  {served_query:6.2f} s")
        print(f"  warm engine alone           {alone_query:6.2f} s   console/engine "
              f"{served_query / alone_query:.2f}x")
        print(f"\nwho served: {served}")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        subprocess.run([RATUI, "engine", "stop", "--project", str(base / "sample")], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
