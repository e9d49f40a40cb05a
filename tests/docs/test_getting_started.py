"""Every command of docs/getting-started.md, run in the page's order on a fresh copy of the sample project (kind:
spark; the `ratui` processes it starts run pipelines and queries on a local Spark).

The page's shell blocks are read as they are: each line is a command (or a chain joined by `&&`), and each command is
run the way a reader runs it, through the installed `ratui` (the script beside this interpreter, in this process's
environment), from a folder that holds `sample_project/` as a clone does. (The installed ratui, not a checkout put
first on PYTHONPATH: a confined Python pipeline's child runs `python -I`, which ignores PYTHONPATH and imports the
installed ratui, so a checkout other than the installed one fails the sample's Python pipeline with RAT-ISO-004.)
A command must exit 0 and print no coded error; the console (`ratui tui`) is opened in a terminal of its own, must
draw the project's pipelines, and must quit on ctrl+q. A command of a kind this test cannot run fails it: the page
cannot gain a command no test runs.

The install (`python3 -m venv .venv && .venv/bin/pip install -e .`) is not repeated here, since it downloads
ratui's dependencies from PyPI: it must be the install the README's test command starts with, which CI runs from a
fresh clone on every build (.ci/run).
"""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs.pages import shell_lines
from tests.processes import stop_group
from tests.warm_engines import warm_engines

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started.md"
README = REPO / "README.md"
INSTALL = ("python3 -m venv .venv", ".venv/bin/pip install -e .")
TIMEOUT = 600  # a cold Spark and a run of the whole sample, on a shared 2-core machine
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>NOPZ\\]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def ratui_command() -> list[str]:
    """The installed `ratui`: the script beside this interpreter (the install under test), else the module."""
    beside = Path(sys.executable).parent / "ratui"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "ratui"]


def environment(warm: dict[str, str]) -> dict[str, str]:
    """This process's environment, as a reader's shell has it, less COLUMNS and LINES (a console takes them over its
    terminal's size), with the warm engine on as a reader has it (its folder the test's own)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    return {**env, **warm}


def test_the_page_runs_from_top_to_bottom(tmp_path):
    workdir = tmp_path / "checkout"
    workdir.mkdir()
    shutil.copytree(REPO / "sample_project", workdir / "sample_project",
                    ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    lines = shell_lines(PAGE.read_text(encoding="utf-8"))
    assert len(lines) > 10, lines
    outputs: dict[str, list[str]] = {}
    with warm_engines(tmp_path / "engines") as warm:
        for line in lines:
            for part in line.split(" && "):
                outputs.setdefault(part, []).append(run_part(part, workdir, warm))
    # what the page says the commands do, checked on what they printed
    first, again, after_merge = (summary(out) for out in outputs["ratui run --project sample_project"])
    assert first == {"succeeded": 11, "warned": 1, "unchanged": 0, "failed": 0}  # one run with warnings
    assert again == {"succeeded": 0, "warned": 0, "unchanged": 11, "failed": 0}  # nothing changed: all skipped
    assert summary(outputs["ratui run +clean_orders --ref dev --project sample_project"][0])["succeeded"] == 2
    # after the merge: gold catches up, the orders pipelines the branch ran are skipped
    assert after_merge["succeeded"] >= 1 and after_merge["failed"] == 0 and after_merge["unchanged"] >= 2
    skipped = [line for line in outputs["ratui run --project sample_project"][2].splitlines() if "unchanged" in line]
    assert any("raw_orders" in line for line in skipped) and any("clean_orders" in line for line in skipped)
    assert (workdir / "sample_project/ecommerce/landing/orders/orders_2026_04.csv").is_file()
    assert summary(outputs["ratui run --project my_project"][0])["succeeded"] >= 1


def summary(output: str) -> dict[str, int]:
    """`ratui run`'s last line: N succeeded (W with warnings), U unchanged (skipped), F not succeeded, in T."""
    found = re.search(r"(\d+) succeeded \((\d+) with warnings\), (\d+) unchanged \(skipped[^)]*\), (\d+) not "
                      r"succeeded", output)
    assert found, output[-2000:]
    return dict(zip(("succeeded", "warned", "unchanged", "failed"), map(int, found.groups())))


def run_part(part: str, workdir: Path, warm: dict[str, str]) -> str:
    if part in INSTALL:
        readme = README.read_text(encoding="utf-8")
        test_command = re.search(r"<!-- test-command.*?-->\n```sh\n(.+)\n```", readme).group(1)
        # the install CI runs from a fresh clone, there with the test extras: `-e ".[test]"` for `-e .`
        assert test_command.replace('-e ".[test]"', "-e .").startswith(" && ".join(INSTALL)), test_command
        return ""
    argv = shlex.split(part)
    if argv[0] in ("ratui", ".venv/bin/ratui"):
        argv = [*ratui_command(), *argv[1:]]
        if argv[len(ratui_command())] == "tui":
            return open_console(argv, workdir, warm)
    elif argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    else:
        pytest.fail(f"getting-started.md has a command this test cannot run: {part!r}")
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT, env=environment(warm))
    assert proc.returncode == 0, f"{part}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "error[" not in proc.stdout + proc.stderr, f"{part}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def open_console(argv: list[str], workdir: Path, warm: dict[str, str]) -> str:
    """The console in a pseudo-terminal of 120x40: it must draw the project's pipelines, then quit on ctrl+q. (The
    console starts Spark in the background: this is why the module is of the spark kind even without its runs.)"""
    import fcntl
    import pty
    import struct
    import termios

    project = workdir / argv[argv.index("--project") + 1]
    names = {p.name for p in project.glob("*/pipelines/*/*") if p.is_dir()}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(argv, cwd=workdir, stdin=slave, stdout=slave, stderr=slave, env=environment(warm),
                            start_new_session=True)
    os.close(slave)
    screen = ""
    try:
        deadline = time.monotonic() + 120
        while not ("Pipelines" in screen and any(name in screen for name in names)):
            assert proc.poll() is None, f"the console ended (exit {proc.returncode}):\n{screen[-3000:]}"
            assert time.monotonic() < deadline, f"the console did not draw the project:\n{screen[-3000:]}"
            screen += ANSI.sub("", read(master, 0.5))
        # ctrl+q quits; the console also stops the Spark it started in the background, which on a busy machine can
        # take a while. A key that arrives while the console is still taking in its project may go unread: ctrl+q
        # again every few seconds until it is gone.
        deadline = time.monotonic() + 180
        while proc.poll() is None:
            assert time.monotonic() < deadline, "the console did not quit on ctrl+q"
            os.write(master, b"\x11")
            pressed = time.monotonic()
            while proc.poll() is None and time.monotonic() - pressed < 5:
                read(master, 0.2)
        assert proc.returncode == 0, f"the console quit with {proc.returncode}:\n{screen[-3000:]}"
        return screen
    finally:
        if proc.poll() is None:
            stop_group(proc)
        os.close(master)


def read(fd: int, wait: float) -> str:
    ready, _, _ = select.select([fd], [], [], wait)
    if not ready:
        return ""
    try:
        return os.read(fd, 65536).decode("utf-8", errors="replace")
    except OSError:  # the terminal's other end closed: the console is gone
        return ""
