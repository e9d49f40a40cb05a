"""The write strategies (a pipeline's `merge_strategy`), declared once: what each needs of a pipeline's configuration
and what shape it gives its table. Configuration checks (config.py), the writer (write/strategies.py, which maps
each name to its handler and refuses to import when one has none) and the hints of the errors that name strategies
(errors.yaml's ${strategies}-like words, filled in from here by `hint`) read these.

Adding a strategy: a StrategySpec line here and its handler registered in write/strategies.py's STRATEGIES
(tests/engine/test_declared_lists.py fails until both are there and every hint names it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ratui.engine.errors import RatuiError, default_hint


@dataclass(frozen=True)
class StrategySpec:
    name: str
    needs_key: bool = False  # `unique_key` is required (RAT-CFG-003); a full refresh clusters the table by it
    needs_partition_column: bool = False  # `partition_column` is required (RAT-CFG-004)
    one_row_per_key: bool = False  # the table holds one row per key: a full refresh keeps one too
    versions: bool = False  # the table keeps versions with validity columns (scd_valid_from / scd_valid_to)
    needs_time_column: bool = False  # `time_column` is required (RAT-CFG-011); runs replace intervals of time
    summary: str = ""


SPECS = (
    StrategySpec("full_refresh", summary="the table becomes the result"),
    StrategySpec("append_only", summary="the result's rows are added"),
    StrategySpec("incremental", needs_key=True, one_row_per_key=True,
                 summary="rows matched by unique_key are updated, new ones added"),
    StrategySpec("delete_insert", needs_key=True, summary="rows of the result's keys are deleted, then inserted"),
    StrategySpec("scd2", needs_key=True, one_row_per_key=True, versions=True,
                 summary="changed rows close their version and open a new one"),
    StrategySpec("snapshot", needs_partition_column=True, summary="the result's partitions are replaced whole"),
    StrategySpec("incremental_by_time", needs_time_column=True,
                 summary="the rows of the run's interval of time_column ({{ start }} to {{ end }}) are replaced"),
)
BY_NAME = {spec.name: spec for spec in SPECS}
NAMES = tuple(BY_NAME)
KEYED = tuple(spec.name for spec in SPECS if spec.needs_key)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# the words errors.yaml's hints use for lists of strategies, e.g. 'Use one of: ${strategies}.'
HINT_WORDS = {
    "strategies": ", ".join(NAMES),
    "partition_strategies": _listed([s.name for s in SPECS if s.needs_partition_column]),
    "version_strategies": _listed([s.name for s in SPECS if s.versions]),
}


def hint(code: str) -> str:
    """The default hint of `code` (errors.yaml), with the strategies it names filled in from SPECS."""
    return default_hint(code, **HINT_WORDS)


def strategy_error(code: str, message: str, **fields: Any) -> RatuiError:
    """A coded error whose default hint names strategies (`hint` fills them in)."""
    return RatuiError(code, message, hint=hint(code), **fields)
