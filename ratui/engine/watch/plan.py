"""Watch mode's planning, pure: a compiled project + changed paths -> Plan (which pipelines to run, in order, and
why; whether ratui.yaml must be reloaded; the coded errors of broken files the changes touch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ratui.engine.errors import RatuiError
from ratui.engine.landing.names import PROCESSED, is_active_name
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.project.discovery import Pipeline
from ratui.engine.project.settings import SETTINGS_FILE
from ratui.engine.watch.ignore import ignored_parts, rel_parts

PIPELINE_FILES = ("pipeline.sql", "pipeline.py", "config.yaml")


@dataclass
class Plan:
    keys: list[str] = field(default_factory=list)  # pipelines to run, in run (topological) order
    reasons: dict[str, str] = field(default_factory=dict)  # key -> why it runs
    changed: list[str] = field(default_factory=list)  # the relevant changed paths, relative to the root
    reload: bool = False  # ratui.yaml changed: reload the settings
    errors: list[RatuiError] = field(default_factory=list)  # coded errors of broken files the changes touch
    blocked: list[str] = field(default_factory=list)  # affected pipelines not run because they are broken

    @property
    def empty(self) -> bool:
        return not (self.keys or self.reload or self.errors or self.blocked)

    def to_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "reasons": dict(self.reasons), "changed": list(self.changed),
                "reload": self.reload, "errors": [e.to_dict() for e in self.errors], "blocked": list(self.blocked)}


def _change_word(change: Any) -> str:
    name = getattr(change, "name", None)
    return name if isinstance(name, str) else "changed"


def _archived(path: Path) -> bool:
    """A zone file gone from the zone's root because the engine archived it (`_processed/{run_id}/name`)."""
    if path.exists():
        return False
    processed = path.parent / PROCESSED
    return processed.is_dir() and any((run / path.name).exists() for run in processed.iterdir())


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass
class _Hits:
    """What the changed paths touch directly."""

    direct: dict[str, str] = field(default_factory=dict)  # key -> why it runs
    changed: set[str] = field(default_factory=set)  # the relevant paths, relative to the root
    seen: list[tuple[str, Path]] = field(default_factory=list)  # every path not ignored: project problems may sit there
    reload: bool = False

    def hit(self, key: str, reason: str) -> None:
        self.direct.setdefault(key, reason)


def plan_for_changes(compiled: CompiledProject, root: Path,
                     changed_paths: Iterable[str | Path | tuple[Any, str]]) -> Plan:
    """Map changed paths to the pipelines to re-run, from the compiled project (the disk is only consulted to
    tell a landing file the engine archived from one a user deleted).

    `changed_paths` holds paths (absolute, or relative to `root`) or watchfiles' (Change, path) pairs.
      - a pipeline's files (pipeline.sql/.py, config.yaml, tests/quality/*.sql) or its folder itself (a new,
        moved or deleted pipeline): that pipeline and its descendants; a deleted pipeline: its dependents
      - a file at a landing zone's root (or the zone folder): the pipelines reading that zone (same namespace)
        and their descendants; not a file the engine itself archived to `_processed/` (no feedback loop)
      - a layer, `pipelines/` or namespace folder appearing or vanishing: every pipeline under it
      - ratui.yaml: `reload`, and nothing to run by itself
    Descendants are reached through healthy pipelines only: a broken pipeline is not run, its errors are
    returned, and what lies downstream of it alone is not run either.
    """
    root = Path(root)
    hits = _direct_hits(compiled.pipelines, root, changed_paths)
    plan = Plan(reload=hits.reload)
    seen_errors: set[str] = set()

    def add_error(e: RatuiError) -> None:
        if str(e) not in seen_errors:
            seen_errors.add(str(e))
            plan.errors.append(e)

    blocked = _with_descendants(compiled, hits.direct, plan, add_error)
    for e in compiled.errors:  # project-level problems (a bad layer folder, namespace name) the changes touch
        for rel, path in hits.seen:
            if e.file and (_under(Path(e.file), path) or _under(path, Path(e.file))):
                hits.changed.add(rel)
                add_error(e)
    plan.blocked = sorted(blocked)
    plan.changed = sorted(hits.changed)
    return plan


def _direct_hits(pipelines: dict[str, Pipeline], root: Path,
                 changed_paths: Iterable[str | Path | tuple[Any, str]]) -> _Hits:
    hits = _Hits()
    for item in changed_paths:
        change, path = item if isinstance(item, tuple) else (None, item)
        parts = rel_parts(root, path)
        if parts is None or ignored_parts(parts):
            continue
        rel = "/".join(parts)
        relevant = _touches(pipelines, root, parts, _change_word(change), hits)
        if relevant is None:
            continue  # not a file the engine reads from the zone, or the engine moved it to _processed/
        hits.seen.append((rel, root.joinpath(*parts)))
        if relevant:
            hits.changed.add(rel)
    return hits


def _touches(pipelines: dict[str, Pipeline], root: Path, parts: tuple[str, ...], word: str, hits: _Hits) -> bool | None:
    """Whether one changed path (its parts under the root) touches the project, recording what it makes run;
    None for a landing path the engine does not read (or archived itself)."""
    rel = "/".join(parts)
    relevant = False
    if parts == (SETTINGS_FILE,):
        hits.reload = relevant = True
    elif len(parts) >= 4 and parts[1] == "pipelines":
        ns, layer, name, rest = parts[0], parts[2], parts[3], parts[4:]
        key = f"{ns}.{layer}.{name}"
        if (not rest or rest[0] in PIPELINE_FILES
                or rest[0] == "tests" and (len(rest) == 1 or rest[1] == "quality" and (
                    len(rest) == 2 or len(rest) == 3 and rest[2].endswith(".sql")))):
            relevant = True
            what = "folder" if not rest else "/".join(rest)
            if key in pipelines:
                hits.hit(key, f"{what} {word}")
            else:  # the pipeline is gone: whoever read it must hear about it (they are broken now)
                for other, p in pipelines.items():
                    if key in p.refs:
                        hits.hit(other, f"its upstream {key} was removed")
    elif 1 <= len(parts) <= 3 and (len(parts) == 1 or parts[1] == "pipelines"):
        folder = root.joinpath(*parts)
        for key, p in pipelines.items():
            if _under(p.folder, folder):
                relevant = True
                hits.hit(key, f"{rel} {word}")
    elif len(parts) in (2, 3, 4) and parts[1] == "landing":
        ns = parts[0]
        zone = parts[2] if len(parts) >= 3 else None
        if len(parts) == 4 and (not is_active_name(parts[3]) or root.joinpath(*parts).is_dir()
                                or _archived(root.joinpath(*parts))):
            return None
        for key, p in pipelines.items():
            if p.namespace == ns and p.zones and (zone is None or zone in p.zones):
                relevant = True
                file = f": {parts[3]} {word}" if len(parts) == 4 else f" ({word})"
                hits.hit(key, f"landing zone '{zone or ', '.join(p.zones)}' changed{file}")
    return relevant


def _with_descendants(compiled: CompiledProject, direct: dict[str, str], plan: Plan,
                      add_error: Callable[[RatuiError], None]) -> set[str]:
    """The pipelines hit and their descendants, through healthy pipelines only, in run order, into the plan; the
    broken ones hit (their errors added) are returned."""
    pipelines = compiled.pipelines
    included: set[str] = set()
    blocked: set[str] = set()
    for key in compiled.graph.order():
        reason = direct.get(key)
        if reason is None:
            parent = next((u for u in compiled.graph.upstream.get(key, ()) if u in included), None)
            if parent is None:
                continue
            reason = f"downstream of {parent}"
        if pipelines[key].ok:
            included.add(key)
            plan.keys.append(key)
            plan.reasons[key] = reason
        else:
            blocked.add(key)
            for e in pipelines[key].errors:
                add_error(e)
    for key in direct:  # broken beyond ordering (in a cycle)
        if key not in included and key not in blocked and key in pipelines:
            blocked.add(key)
            for e in pipelines[key].errors:
                add_error(e)
    return blocked
