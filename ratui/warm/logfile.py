"""The warm engine's log (`KEY.log` in the engines' folder), kept to a bounded size: past MAX_BYTES it becomes
`KEY.log.1` (the older one it replaces is dropped) and a new `KEY.log` takes its place, also as the engine's stdout
and stderr. `ratui engine logs` reads the recent lines across both.

    rotate(path, fds)        the log moved aside and a new one opened (onto `fds`) when it is over MAX_BYTES
    recent_lines(path, n)    the last n lines of the older and the current log
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_BYTES = 4 * 1024 * 1024  # an engine logs a few lines a command: thousands of commands in each file


def older(path: Path) -> Path:
    return path.with_name(f"{path.name}.1")


def rotate(path: Path, fds: tuple[int, ...] = (), max_bytes: int = MAX_BYTES) -> bool:
    """Move the log aside when it is over `max_bytes`, open a new one (0600) and make each of `fds` (the engine's
    stdout and stderr) write to it. Whether it was rotated; a log that cannot be rotated (a full disk, a folder
    gone) stays as it is."""
    try:
        if os.stat(path).st_size <= max_bytes:
            return False
        os.replace(path, older(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return False
    try:
        for target in fds:
            os.dup2(fd, target)
    finally:
        os.close(fd)
    return True


def writes_to(path: Path, fd: int) -> bool:
    """Whether `fd` is the file at `path` (the engine's stderr is its log, unless it was started by hand)."""
    try:
        mine, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def recent_lines(path: Path, count: int) -> list[str] | None:
    """The last `count` lines of the log, the older file's first; None when neither exists."""
    lines: list[str] = []
    found = False
    for one in (older(path), path):
        try:
            lines += one.read_text(encoding="utf-8", errors="replace").splitlines()
            found = True
        except FileNotFoundError:
            continue
    return lines[-count:] if found else None
