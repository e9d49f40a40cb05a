"""The console's status line says which Spark serves its runs (its own, in its process) and whether the project's
warm engine, which runs the shell's `ratui run`, `query`, `diff` and `merge`, is up and what it holds (issue 49):
a real engine started and stopped from the shell shows on the line within the console's period, at 80x24 too, and
the palette's "Engines" says the rest (pid, since, memory, commands, its Spark). The engine is asked on a worker,
never on the event loop."""

from __future__ import annotations

import threading

from ratui.console.controller import Controller
from ratui.console.shell_engine import UP, ShellEngine

from .conftest import copy_sample, flat, make_app, run, screen_text, settle, wait_for
from .seed import FIXED_NOW

SMALL = (80, 24)
LARGE = (160, 48)


def status_line(app) -> str:
    return screen_text(app).splitlines()[-2]


class FixedEngine(Controller):
    """The real console over the sample, and a warm engine that is up with fixed numbers (no clock, pid or host
    text of this machine in a picture). Records the threads it was asked on."""

    asked_on: list[str]

    def shell_engine(self):
        self.asked_on = [*getattr(self, "asked_on", []), threading.current_thread().name]
        return ShellEngine(UP, pid=4242, since=FIXED_NOW.timestamp() - 720, commands=12, running=1,
                           rss_bytes=410 * 2**20, spark="local[2], 2 cores", idle_minutes=15,
                           running_argv=("run bronze.raw_customers --force",), warm_off="RATUI_WARM=0")


def fixed_app(root, **kwargs):
    return make_app(root, controller=FixedEngine(root), **kwargs)


def where_spark_runs(app) -> None:
    app.spark_where = "local[2], 2 cores"


# ------------------------------------------------------------------------------------------ pictures
def snap(snap_compare, app, size, *steps):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            step(pilot.app)
            await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_no_engine_at_80x24(snap_compare, seeded):
    assert snap(snap_compare, make_app(seeded), SMALL)


def test_an_engine_up_at_80x24(snap_compare, seeded):
    assert snap(snap_compare, fixed_app(seeded, spark_state="ready"), SMALL, where_spark_runs)


def test_an_engine_up_at_160x48(snap_compare, seeded):
    assert snap(snap_compare, fixed_app(seeded, spark_state="ready"), LARGE, where_spark_runs)


# ------------------------------------------------------------------------------------------ words
def test_the_line_says_less_as_the_terminal_narrows_and_the_engine_is_asked_off_the_loop(seeded):
    """Wide: the engine's age, commands, memory and pid, and the console's own Spark named as its own; 80 columns:
    up and its commands, and Spark's state still whole. Every question to the engine ran on a worker thread."""
    lines = {}
    for size in (LARGE, (120, 40), SMALL):
        app = fixed_app(seeded, spark_state="ready")

        async def go(app=app, size=size):
            async with app.run_test(size=size) as pilot:
                await settle(pilot)
                where_spark_runs(app)
                await pilot.pause()
                lines[size] = status_line(app)
                assert app.controller.asked_on and threading.main_thread().name not in app.controller.asked_on

        run(go())
    large = flat(lines[LARGE])
    assert "● shell engine: up 12 min, 1 running, 12 cmds, 410 MiB, pid 4242" in large
    assert large.endswith("console's own: local[2], 2 cores")
    assert "● shell engine: up, 1 running, 12 cmds" in lines[(120, 40)] and "pid" not in lines[(120, 40)]
    assert lines[(120, 40)].rstrip().endswith(" local[2], 2 cores")  # the engine first, then the words "own"
    assert "● Spark ready" in lines[SMALL] and "shell engine" in lines[SMALL] and "12 cmds" in lines[SMALL]


class CountingEngine(Controller):
    """An engine that has served one more command each time it is asked."""

    asked = 0

    def shell_engine(self):
        self.asked += 1
        return ShellEngine(UP, pid=4242, since=FIXED_NOW.timestamp(), commands=self.asked)


def test_the_engine_is_asked_again_when_a_run_ends_and_when_another_process_commits(seeded):
    """Not only on the period (10 s, too long for this test to wait): a run of the console that ends, and a commit
    of another process (a command the engine ran from the shell), each ask at once, and the line follows."""
    from ratui.console.follow import StateItem
    from ratui.engine.events import RunFinished, RunQueued, RunStarted

    app = make_app(seeded, controller=CountingEngine(seeded))

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert app.controller.asked == 1 and "● shell engine: up 0 s, 1 cmd, pid 4242" in status_line(app)
            for event in (RunQueued("r1", "ecommerce.bronze.raw_customers", "console"),
                          RunStarted("r1", "ecommerce.bronze.raw_customers", "run-r1")):
                app.controller._on_event(event)
            await settle(pilot)
            assert app.controller.asked == 1  # a run that starts is not a reason
            app.controller._on_event(RunFinished("r1", "ecommerce.bronze.raw_customers", "success", 5, 10, None))
            await settle(pilot)
            assert app.controller.asked == 2 and "2 cmds" in status_line(app)
            app.controller._post(StateItem("db", 0))
            await settle(pilot)
            assert app.controller.asked == 3 and "3 cmds" in status_line(app)

    run(go())


def test_an_engines_folder_open_to_others_is_said_with_its_code(tmp_path, monkeypatch):
    """RAT-ENG-001 on the line, the folder and its mode in the palette's "Engines"; nothing is changed or made."""
    folder = tmp_path / "engines"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(folder))
    app = make_app(copy_sample(tmp_path))

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "✘ shell engine: RAT-ENG-001" in status_line(app)
            app.action_engines()
            await settle(pilot)
            notice = app.notices[-1]
            assert "RAT-ENG-001" in notice and str(folder) in notice and "not private" in notice
            assert "mode 0777" in notice

    run(go())
    assert oct(folder.stat().st_mode & 0o777) == "0o777" and not any(folder.iterdir())


# ------------------------------------------------------------------------------------------ a real engine
def test_a_real_engine_shows_while_it_listens_and_is_off_once_killed(tmp_path, monkeypatch):
    """The project's real warm engine (ratui/warm/host.py, started as `ratui` starts it), its Spark held back
    (it starts Spark once the process named to it ends: this test's), so no JVM: the line says it is up and has
    served nothing; killed, its socket is left behind and refuses, and the line says off."""
    import os
    import signal
    import subprocess
    import sys

    root = copy_sample(tmp_path)
    engines = tmp_path / "engines"
    engines.mkdir(mode=0o700)
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(engines))
    app = make_app(root, shell_engine_seconds=0.2)
    env = {**os.environ, "RATUI_WARM": "1"}
    engine = None

    async def go():
        nonlocal engine
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            assert "○ shell engine off" in status_line(app)
            with open(engines / "engine.log", "ab") as log:
                engine = subprocess.Popen([sys.executable, "-m", "ratui.warm.host", str(root), str(os.getpid())],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(root), env=env)
            await wait_for(pilot, lambda: "● shell engine: 0 cmds" in status_line(app), 60)
            assert app.shell_engine.pid == engine.pid and app.shell_engine.spark is None
            engine.send_signal(signal.SIGKILL)
            engine.wait(30)
            assert any(engines.glob("*.sock"))  # a dead engine's socket: refused, not waited on
            await wait_for(pilot, lambda: "○ shell engine off" in status_line(app), 30)
            await settle(pilot)

    try:
        run(go())
    finally:
        if engine is not None and engine.poll() is None:
            engine.kill()
            engine.wait(30)


def test_the_line_follows_a_real_engine_started_and_stopped_from_the_shell(tmp_path, monkeypatch):
    from tests.cli.test_warm_engine import Warm

    root = copy_sample(tmp_path)
    engines = tmp_path / "engines"
    shell = Warm(root, engines)
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(engines))
    app = make_app(root, shell_engine_seconds=0.5)

    def line() -> str:
        return status_line(app)

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            assert "○ shell engine off" in line()
            started = shell.ratui("engine", "start")
            assert started.returncode == 0, started.stderr
            pid = shell.status()["pid"]
            await wait_for(pilot, lambda: "● shell engine:" in line() and "0 cmds" in line(), 60)
            app.action_engines()
            await wait_for(pilot, lambda: any(n.startswith("Engines:") and f"pid {pid}" in n for n in app.notices))
            notice = [n for n in app.notices if n.startswith("Engines:")][-1]
            assert "its own Spark" in notice and "0 served" in notice

            stopped = shell.ratui("engine", "stop")
            assert stopped.returncode == 0, stopped.stderr
            await wait_for(pilot, lambda: "○ shell engine off" in line(), 60)
            await settle(pilot)

    try:
        run(go())
    finally:
        shell.stop()


def test_the_engines_notice_says_what_the_engine_holds(seeded):
    """The palette's "Engines": the console's own Spark, and the engine's pid, since when, its Spark, its commands
    (with the one it runs now), its memory and when it stops."""
    app = fixed_app(seeded, spark_state="ready")

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            where_spark_runs(app)
            app.action_engines()
            await settle(pilot)
            return app.notices[-1]

    notice = run(go())
    assert notice.startswith("Engines: The console's runs use its own Spark, in this process: local[2], 2 cores.")
    for words in ("pid 4242, since ", "(12 min)", "its Spark: local[2], 2 cores", "12 served, 1 running",
                  "410 MiB", "running: ratui run bronze.raw_customers --force", "stops after 15 idle minute(s)",
                  "The shell's commands run in their own process (RATUI_WARM=0)"):
        assert words in notice, words


class ServingHere(Controller):
    """The real console over the sample, serving the shell's commands itself (ratui/warm/hosted.py)."""

    def shell_engine(self):
        return ShellEngine(UP, pid=4242, since=FIXED_NOW.timestamp() - 60, commands=3, running=1, console=True,
                           here=True, running_argv=("watch",))


def test_a_console_serving_the_shell_says_so_on_its_line_and_in_its_notice(seeded):
    """When the console itself runs the shell's commands, its line says so (at 80x24 too) and "Engines" says they
    run on the console's own Spark and until when."""
    app = make_app(seeded, controller=ServingHere(seeded), spark_state="ready")

    async def go():
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: "serving the shell" in status_line(app))
            line = status_line(app)
            app.action_engines()
            await settle(pilot)
            return line, app.notices[-1]

    line, notice = run(go())
    assert "● serving the shell: 1 running, 3 cmds" in line or "● serving the shell: 3 cmds" in line, line
    assert "run in this console, on its Spark: 3 served, 1 running" in flat(notice)
    assert "until that console closes, or `ratui engine stop`" in notice and "running: ratui watch" in notice
