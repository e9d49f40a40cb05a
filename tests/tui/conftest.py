"""Console test fixtures: copies of the sample project (seeded with fixed history) and pilot helpers."""

from __future__ import annotations

import io
import shutil
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


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A sample project with fixed history (shared by a module's read-only tests)."""
    root = copy_sample(tmp_path_factory.mktemp("seeded"))
    seed_history(root)
    return root


def make_app(root: Path, **kwargs):
    """The App with a frozen clock and no blinking, so what it draws depends only on the data."""
    from ratui.app import RatuiApp

    kwargs.setdefault("spark_state", "idle")
    kwargs.setdefault("blink", False)
    kwargs.setdefault("clock", lambda: 1000.0)
    kwargs.setdefault("now", lambda: FIXED_NOW)
    return RatuiApp(root, **kwargs)


async def settle(pilot, rounds: int = 4) -> None:
    """Let every worker finish and every message be handled (several rounds: results start new loads)."""
    from textual.worker import WorkerFailed

    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        for worker in list(app.workers):
            try:
                await worker.wait()
            except (WorkerFailed, Exception):  # a failed worker was handled by the app (error screen, toast)
                pass
        await pilot.pause()


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
