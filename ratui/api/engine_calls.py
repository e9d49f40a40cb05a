"""The Python API's calls answered by the project's running warm engine (ratui/warm/api_served.py), or not at all:
one door for `p.sql(...).to_arrow()` (queries.py) and `p.run(...)` (runs.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from ratui.engine.errors import RatuiError

T = TypeVar("T")


def answered(root: Path, message: dict, done: str, read: Callable[[int], T]) -> T | None:
    """`read(fd)` of what the engine wrote when it answered `message` with `done` (its count); None when this process
    answers itself: its own Spark is started already, no engine runs, or the engine has another environment. The
    engine's coded error is raised here as this process would raise it."""
    from ratui.engine.spark import session as spark_session
    from ratui.warm import client

    if spark_session.is_started():
        return None  # this process pays for a Spark of its own already: it answers
    got = client.api_call(root, message)
    if got is None:
        return None
    answer, fd = got
    try:
        if "error" in answer:
            error: dict[str, Any] = answer["error"]
            raise RatuiError(error["code"], error["message"], error.get("file"), error.get("line"), error.get("hint"))
        return read(fd) if done in answer else None
    finally:
        os.close(fd)
