"""The project's outline: what the last compile found, in the few fields the console's pipeline tree shows first.

Opening the console on a large project waits for a compile (ratui's engine imported, every pipeline's files read
and hashed: about a second at 1,500 pipelines). The outline lets the tree be drawn before that: each full compile
writes `.ratui/outline.json` (every pipeline's key, merge strategy and first error code, the project's problems
and the first pipeline in run order), and the console reads it at launch, with nothing of the engine imported, and
draws the tree from it, said as such, until its own compile replaces it. It is a picture of the last compile, never
an input: nothing is run, checked or decided from it.

JSON, read with every value validated (a damaged, foreign or wrong-shaped file is no outline), written only when
its content changed (to a temporary file, then renamed), and only for the project it was written in (a moved or
copied project's outline names another root and is ignored).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = 1
FILE = "outline.json"
MAX_BYTES = 64 * 1024 * 1024  # far past any real project (15,000 pipelines are about 1.2 MB)


@dataclass(frozen=True)
class OutlinePipeline:
    key: str
    namespace: str
    layer: str
    name: str
    strategy: str | None
    error: str | None  # the code of its first error, if it had one


@dataclass(frozen=True)
class Outline:
    root: str
    pipelines: dict[str, OutlinePipeline]
    first: str | None  # the first pipeline in run order
    problems: tuple[tuple[str, str], ...]  # the project's own errors: (code, message)


def _path(root: Path) -> Path:
    return Path(root) / ".ratui" / FILE


def to_json(compiled: Any) -> str:
    """The outline of a CompiledProject (compiler.py, which calls this: typed Any so no import comes back)."""
    pipelines = [[key, p.config.merge_strategy if p.config is not None else None,
                  p.errors[0].code if p.errors else None] for key, p in compiled.pipelines.items()]
    first = compiled.graph.order()[:1] or sorted(compiled.pipelines)[:1]
    data = {"format": FORMAT, "root": str(compiled.root), "first": first[0] if first else None,
            "pipelines": pipelines, "problems": [[e.code, e.message] for e in compiled.errors]}
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def write(compiled: Any) -> None:
    """Keep the outline of `compiled` (never raises: an outline that cannot be written is no outline)."""
    path = _path(compiled.root)
    try:
        text = to_json(compiled)
        try:
            if path.read_text(encoding="utf-8") == text:
                return
        except (OSError, ValueError):
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".outline-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, ValueError, TypeError):
        pass


def read(root: Path) -> Outline | None:
    """The outline the last compile of the project at `root` wrote, or None (none, damaged, another project's)."""
    try:
        root = Path(root).resolve()  # as settings.py resolves it, which the compile wrote
        path = _path(root)
        if path.stat().st_size > MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return _parse(data, str(root))
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        return None


def _parse(data: Any, root: str) -> Outline | None:
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("root") != root:
        return None
    pipelines: dict[str, OutlinePipeline] = {}
    for row in data["pipelines"]:
        key, strategy, error = row
        parts = key.split(".") if isinstance(key, str) else []
        if len(parts) != 3 or not all(parts) or not all(v is None or isinstance(v, str) for v in (strategy, error)):
            return None
        pipelines[key] = OutlinePipeline(key, parts[0], parts[1], parts[2], strategy, error)
    first = data.get("first")
    if first is not None and first not in pipelines:
        return None
    problems = tuple((str(code), str(message)) for code, message in data["problems"])
    return Outline(root, pipelines, first, problems)
