"""Console test fixtures: copies of the sample project (seeded with fixed history) and pilot helpers."""

from __future__ import annotations

import io
import shutil
import weakref
from pathlib import Path

import pytest

from .seed import FIXED_NOW, seed_history

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_project"


def copy_sample(dest_parent: Path, name: str = "sample") -> Path:
    dest = dest_parent / name
    shutil.copytree(SAMPLE, dest, ignore=shutil.ignore_patterns(".ratui", "warehouse", "_processed", "__pycache__"))
    return dest


@pytest.fixture(autouse=True)
def fresh_user_settings(user_config_home):
    """Each test starts with no remembered theme (a test that toggles it must not recolour the next one)."""
    yield
    for leftover in user_config_home.glob("ratui/console.yaml*"):
        leftover.unlink()


@pytest.fixture(autouse=True)
def own_engines_folder(tmp_path_factory, monkeypatch):
    """The consoles here look for the project's warm engine (the status line) in a folder of the tests' own, never
    in the user's: what they draw does not depend on the machine's engines."""
    folder = tmp_path_factory.getbasetemp() / "engines"
    folder.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("RATUI_ENGINE_DIR", str(folder))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A sample project with fixed history (shared by a module's read-only tests)."""
    root = copy_sample(tmp_path_factory.mktemp("seeded"))
    seed_history(root)
    return root


_FAILED_WORKERS: "weakref.WeakKeyDictionary[object, list]" = weakref.WeakKeyDictionary()


def make_app(root: Path, **kwargs):
    """The App with a frozen clock and no blinking, so what it draws depends only on the data. Every worker of it
    that ends in error is kept (Textual forgets a worker once it ends): settle() fails the test with them."""
    from ratui.app import RatuiApp

    kwargs.setdefault("spark_state", "idle")
    kwargs.setdefault("blink", False)
    kwargs.setdefault("clock", lambda: 1000.0)
    kwargs.setdefault("now", lambda: FIXED_NOW)
    app = RatuiApp(root, **kwargs)
    _keep_failed_workers(app)
    return app


def _keep_failed_workers(app) -> None:
    from textual.worker import WorkerState

    failed: list = []
    _FAILED_WORKERS[app] = failed
    manager = app.workers
    forget = manager._remove_worker  # each worker's done-callback, bound when it starts

    def remove(worker) -> None:
        if worker.state == WorkerState.ERROR:
            failed.append(worker)
        forget(worker)

    manager._remove_worker = remove


EXTRA_ROUNDS = 20


async def settle(pilot, rounds: int = 4, timeout: float = 120.0) -> None:
    """Let every worker finish and every message be handled (several rounds: results start new loads). A worker
    that raised fails the test here: ratui's own background work catches what it expects and reports it (an error
    screen, a toast), so an exception that escapes a worker is a bug nothing handled. A worker still running after
    `timeout` seconds fails it too."""
    import asyncio

    from textual.worker import WorkerCancelled, WorkerFailed, WorkerState

    app = pilot.app
    failed = _FAILED_WORKERS.setdefault(app, [])
    done = 0
    # the rounds asked for, and up to EXTRA_ROUNDS more while a worker is still to start or finish (a loaded machine
    # starts them late: a picture taken before a table's load had run was drawn half laid out)
    while done < rounds or (any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers)
                            and done < rounds + EXTRA_ROUNDS):
        done += 1
        await pilot.pause()
        for worker in list(app.workers):
            if worker.state == WorkerState.PENDING:
                continue  # not started yet: the next round waits for it
            try:
                await asyncio.wait_for(asyncio.shield(worker.wait()), timeout)
            except WorkerCancelled:  # an exclusive worker replaced by a newer one of its group
                pass
            except WorkerFailed:
                if worker not in failed:
                    failed.append(worker)
            except asyncio.TimeoutError:
                raise AssertionError(f"worker {worker.name!r} still running after {timeout:.0f} s") from None
        await pilot.pause()
    if failed:
        described = "; ".join(f"{w.name or w.group}: {w.error!r}" for w in failed)
        failed.clear()
        raise AssertionError(f"background work raised and nothing handled it: {described}")


def screen_text(app) -> str:
    """The screen as plain text (what a person would read)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


async def wait_for(pilot, predicate, timeout: float = 60.0, step: float = 0.2) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting; screen:\n{screen_text(pilot.app)}")
        await pilot.pause(step)


def run(coro):
    """Run a pilot coroutine from a plain (sync) test: no async pytest plugin needed."""
    import asyncio

    return asyncio.run(coro)


def flat(text: str) -> str:
    """Screen text with every run of whitespace (line ends, box padding) as one space: for phrases that wrap."""
    return " ".join(text.replace("│", " ").replace("█", " ").replace("▊", " ").replace("▎", " ").split())


def break_project(root: Path) -> None:
    """Bad input of each kind: a misspelt strategy, a template syntax error, a cycle and a bad layer folder."""
    pipes = root / "ecommerce" / "pipelines"
    f = pipes / "silver" / "product_catalog" / "pipeline.sql"
    f.write_text(f.read_text().replace("-- @merge_strategy: full_refresh", "-- @merge_strategy: full_refresch"))
    f = pipes / "gold" / "daily_revenue" / "pipeline.sql"
    f.write_text(f.read_text() + "\n{% if %}\n")
    f = pipes / "silver" / "clean_customers" / "pipeline.sql"
    f.write_text(f.read_text() + "\n-- reads {{ ref('gold.customer_lifetime_value') }}\n")
    (pipes / "platinum" / "vip").mkdir(parents=True)
    (pipes / "platinum" / "vip" / "pipeline.sql").write_text("SELECT 1 AS x\n")


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Path:
    root = copy_sample(tmp_path_factory.mktemp("broken"))
    break_project(root)
    return root


@pytest.fixture(scope="module")
def paged_for_snapshots(tmp_path_factory) -> Path:
    root = copy_sample(tmp_path_factory.mktemp("paged"))
    seed_history(root, bulk=250)
    return root
