"""What watch mode never runs for: WatchFilter drops, at the source (watchfiles' filter), every path that must never
trigger a run: the engine's own writes (.ratui/, {ns}/warehouse/, _processed/), _samples/, __pycache__ and editor
droppings (swap files, ~ backups, .# locks, #autosave#, ...)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ratui.engine.landing.names import RESERVED_DIRS
from ratui.engine.project.settings import STATE_DIR

IGNORED_DIR_NAMES = {"__pycache__", *RESERVED_DIRS}
_VIM_SWAP = re.compile(r"\.sw[a-px]$")  # .swp, .swo, .swn, ... and vim's .swx probe
_JETBRAINS = ("___jb_tmp___", "___jb_old___")


def is_editor_temp(name: str) -> bool:
    """Files editors write next to the real one while saving."""
    return (
        name.startswith(".")  # .x.swp, .#x (emacs lock), .DS_Store, .x.tmp (atomic-save temp files)
        or name.endswith("~")  # backups
        or name == "4913"  # vim's "can I write here" probe
        or bool(_VIM_SWAP.search(name))
        or (name.startswith("#") and name.endswith("#") and len(name) > 1)  # emacs autosave
        or name.endswith(_JETBRAINS)
    )


def rel_parts(root: Path, path: str | Path) -> tuple[str, ...] | None:
    """The path's parts relative to the project root, or None when it lies outside it."""
    p = Path(path)
    if not p.is_absolute():
        return p.parts
    try:
        return p.relative_to(root).parts
    except ValueError:
        try:
            return p.resolve().relative_to(root.resolve()).parts
        except (ValueError, OSError):
            return None


def ignored_parts(parts: tuple[str, ...] | None) -> bool:
    if not parts:  # outside the project, or the root folder itself
        return True
    if parts[0] == STATE_DIR:
        return True
    if len(parts) >= 2 and parts[1] == "warehouse":  # {namespace}/warehouse/: the engine's table files
        return True
    for part in parts:
        if part.startswith(".") or part in IGNORED_DIR_NAMES:  # hidden folders (.git, .idea, .ratui) too
            return True
    return is_editor_temp(parts[-1])


def is_ignored(root: Path, path: str | Path) -> bool:
    """True for a path that must never trigger a run."""
    return ignored_parts(rel_parts(root, path))


class WatchFilter:
    """A watchfiles `watch_filter`: keep a change unless it is ignored (see is_ignored)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def __call__(self, change: Any, path: str) -> bool:
        return not is_ignored(self.root, path)
