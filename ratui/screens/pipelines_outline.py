"""The last compile's outline (engine/project/outline.py, read at launch) in the shape the Pipelines tree reads from a
compiled project, drawn until this launch's compile replaces it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class _Problem:
    """An error as the outline keeps it: its code (and the project's problems their message)."""

    code: str
    message: str = ""
    hint: str | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class _Config:
    merge_strategy: str | None


@dataclass(frozen=True)
class _OutlinePipeline:
    key: str
    namespace: str
    layer: str
    name: str
    config: _Config | None
    errors: list[_Problem] = field(default_factory=list)


class OutlineView:
    """The last compile's outline in the shape the tree reads from a compiled project (its pipelines' keys,
    names, strategies and first error codes; the project's problems; the first pipeline to select). Drawn until
    this launch's compile replaces it; nothing is run or decided from it."""

    provisional = True

    def __init__(self, outline: Any) -> None:
        self.root = Path(outline.root)
        self.first: str | None = outline.first
        self.errors = [_Problem(code, message) for code, message in outline.problems]
        self.pipelines = {key: _OutlinePipeline(key, p.namespace, p.layer, p.name,
                                                _Config(p.strategy) if p.strategy else None,
                                                [_Problem(p.error)] if p.error else [])
                          for key, p in outline.pipelines.items()}
