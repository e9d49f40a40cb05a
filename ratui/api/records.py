"""Typed records of what the API lists: pipelines, refs, runs of the history, commits, snapshots, diffs.

Each list comes back as a `Records` (a plain list that also renders in Jupyter). The records are frozen dataclasses
built from the engine's own records, so a notebook never sees a SQLite row or a catalog internal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Sequence, TypeVar

from ratui.api import html
from ratui.engine.errors import RatuiError

T = TypeVar("T")


class Records(list, Generic[T]):
    """A list of records that renders as a row-capped table in Jupyter (`columns`: the fields shown)."""

    def __init__(self, items: Sequence[T] = (), *, columns: Sequence[str] = (), caption: str = ""):
        super().__init__(items)
        self.columns = list(columns)
        self.caption = caption

    def _repr_html_(self) -> str:
        columns = self.columns or (html.field_names(self[0]) if self else [])
        return html.records(self, columns, caption=self.caption)


@dataclass(frozen=True)
class PipelineInfo:
    """One pipeline of the project, as discovered and compiled (no Spark)."""

    key: str  # namespace.layer.name: the table it writes
    namespace: str
    layer: str  # bronze | silver | gold
    name: str
    kind: str | None  # sql | python (None: its folder has no pipeline file)
    strategy: str | None  # the merge strategy (None when its configuration has errors)
    upstream: tuple[str, ...]  # the tables it reads (ref())
    zones: tuple[str, ...]  # the landing zones it reads
    tags: tuple[str, ...]
    tests: tuple[str, ...]  # its quality tests
    description: str
    file: Path | None
    errors: tuple[RatuiError, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    @classmethod
    def of(cls, pipeline: Any) -> "PipelineInfo":
        config = pipeline.config
        return cls(pipeline.key, pipeline.namespace, pipeline.layer, pipeline.name, pipeline.kind,
                   config.merge_strategy if config else None, tuple(pipeline.refs), tuple(pipeline.zones),
                   tuple(config.tags) if config else (), tuple(t.name for t in pipeline.tests),
                   config.description if config else "", pipeline.file, tuple(pipeline.errors))


PIPELINE_COLUMNS = ("key", "kind", "strategy", "upstream", "tags", "tests", "errors")


@dataclass(frozen=True)
class RefInfo:
    """A branch: main, a user's branch, or a run's or publish's branch that ratui keeps while it works."""

    name: str
    head: str  # its newest commit
    created_at: str
    kind: str  # main | branch | run | publish
    fork_hash: str | None  # the commit it was created from (None for main)
    run_id: str | None  # a run's branch: the run

    @classmethod
    def of(cls, ref: Any) -> "RefInfo":
        from ratui.engine.ops.branches import PUBLISH_PREFIX
        from ratui.engine.vocabulary import MAIN, RUN_PREFIX

        kind = ("main" if ref.name == MAIN else "run" if ref.name.startswith(RUN_PREFIX)
                else "publish" if ref.name.startswith(PUBLISH_PREFIX) else "branch")
        return cls(ref.name, ref.head, ref.created_at, kind, ref.fork_hash, ref.run_id)


REF_COLUMNS = ("name", "kind", "head", "created_at")


@dataclass(frozen=True)
class RunError:
    """A run's coded error (the engine's RatuiError as a record): `raise err.exception()` to raise it."""

    code: str
    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None

    @classmethod
    def of(cls, error: dict[str, Any] | None) -> "RunError | None":
        if not error or not error.get("code"):
            return None
        return cls(error["code"], error.get("message") or "", error.get("file"), error.get("line"), error.get("hint"))

    def exception(self) -> RatuiError:
        try:
            return RatuiError(self.code, self.message, self.file, self.line, self.hint)
        except ValueError:  # a code of a newer ratui's database
            return RatuiError("RAT-RUN-002", f"{self.code} {self.message}", self.file, self.line, self.hint)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else f"{self.file}: " if self.file else ""
        return f"{self.code} {where}{self.message}"


@dataclass(frozen=True)
class RunRecord:
    """One run of the history (any process's: the CLI's, a console's, watch mode's, the API's)."""

    run_id: str
    pipeline: str
    status: str  # pending | running | success | failed | cancelled | skipped
    trigger: str | None  # cli | console | watch | reaper | api
    ref: str  # the branch it merges (or merged) into
    run_type: str | None
    reason: str | None
    strategy: str | None
    queued_at: str | None
    started_at: str | None
    finished_at: str | None
    duration_ms: int | None
    rows_written: int | None
    warnings: int | None
    merged: bool
    error: RunError | None
    phases: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, row: dict[str, Any]) -> "RunRecord":
        phases = row.get("phases") or {}
        if isinstance(phases, str):
            phases = json.loads(phases)
        error = RunError.of({"code": row.get("error_code"), "message": row.get("error_message"),
                             "file": row.get("error_file"), "line": row.get("error_line"),
                             "hint": row.get("error_hint")})
        return cls(row["id"], row["pipeline"], row["status"], row.get("trigger"), row.get("ref") or "main",
                   row.get("run_type"), row.get("reason"), row.get("strategy"), row.get("queued_at"),
                   row.get("started_at"), row.get("finished_at"), row.get("duration_ms"), row.get("rows_written"),
                   row.get("warnings"), bool(row.get("merged_at")), error, dict(phases))


RUN_COLUMNS = ("run_id", "pipeline", "status", "trigger", "ref", "started_at", "duration_ms", "rows_written",
               "error")


@dataclass(frozen=True)
class SnapshotInfo:
    """One Iceberg snapshot of a table (from its metadata)."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None
    summary: dict[str, str]

    @classmethod
    def of(cls, snapshot: Any) -> "SnapshotInfo":
        summary = snapshot.summary
        operation = summary.operation.value if summary is not None else None
        extra = dict(summary.additional_properties) if summary is not None else {}
        return cls(snapshot.snapshot_id, snapshot.parent_snapshot_id, snapshot.timestamp_ms, operation, extra)


SNAPSHOT_COLUMNS = ("snapshot_id", "parent_id", "timestamp_ms", "operation")
LOG_COLUMNS = ("hash", "created_at", "kind", "pipeline", "run_id", "message")
DIFF_COLUMNS = ("table", "change", "changed_on", "schema_changes")
