"""The merge strategies, declared once: what each needs of a pipeline's configuration. Configuration checks
(config.py) and the writer (write/strategies.py, which maps each name to its handler and refuses to import when one
has none) read these; the README's strategy table says the same in words.

Adding a strategy: a StrategySpec line here and its handler registered in write/strategies.py's STRATEGIES."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StrategySpec:
    name: str
    needs_key: bool = False  # `unique_key` is required (RAT-CFG-003)
    needs_partition_column: bool = False  # `partition_column` is required (RAT-CFG-004)
    summary: str = ""


SPECS = (
    StrategySpec("full_refresh", summary="the table becomes the result"),
    StrategySpec("append_only", summary="the result's rows are added"),
    StrategySpec("incremental", needs_key=True, summary="rows matched by unique_key are updated, new ones added"),
    StrategySpec("delete_insert", needs_key=True, summary="rows of the result's keys are deleted, then inserted"),
    StrategySpec("scd2", needs_key=True, summary="changed rows close their version and open a new one"),
    StrategySpec("snapshot", needs_partition_column=True, summary="the result's partitions are replaced whole"),
)
BY_NAME = {spec.name: spec for spec in SPECS}
NAMES = tuple(BY_NAME)
KEYED = tuple(spec.name for spec in SPECS if spec.needs_key)
