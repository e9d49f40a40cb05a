"""`partition_by` as a pipeline's configuration writes it: terms parsed and validated, nothing built.

    partition_by: [day(order_ts), country]      # config.yaml (a list, or a comma-separated string)
    -- @partition_by: day(order_ts), country     # or an annotation

Terms are `column` (same as `identity(column)`), `identity(c)`, `year(c)`, `month(c)`, `day(c)` and `hour(c)` (the
plural spellings years/months/days/hours are accepted too). write/partitioning.py turns them into Iceberg specs
and partitioned writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

TRANSFORMS = ("identity", "year", "month", "day", "hour")


_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour"}


_TERM = re.compile(r"^\s*(?:([A-Za-z_]+)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)|([A-Za-z_][A-Za-z0-9_]*))\s*$")


@dataclass(frozen=True)
class PartitionTerm:
    transform: str  # one of TRANSFORMS
    column: str

    def __str__(self) -> str:
        return self.column if self.transform == "identity" else f"{self.transform}({self.column})"

    @property
    def field_name(self) -> str:
        """Iceberg's conventional partition field name: the column for identity, else column_transform."""
        return self.column if self.transform == "identity" else f"{self.column}_{self.transform}"


def parse_term(text: str) -> PartitionTerm:
    """`day(ts)` -> PartitionTerm("day", "ts"). ValueError with a readable message when malformed."""
    match = _TERM.match(str(text))
    if not match:
        raise ValueError(f"'{text}' is not a partition term: write column or transform(column), "
                         f"transform one of {', '.join(TRANSFORMS)}")
    if match.group(3):
        return PartitionTerm("identity", match.group(3))
    transform = match.group(1).lower()
    transform = _ALIASES.get(transform, transform)
    if transform not in TRANSFORMS:
        raise ValueError(f"unknown partition transform '{match.group(1)}' in '{text}' "
                         f"(use one of {', '.join(TRANSFORMS)})")
    return PartitionTerm(transform, match.group(2))


def parse_partition_by(items: Iterable[str]) -> tuple[PartitionTerm, ...]:
    terms = tuple(parse_term(item) for item in items)
    seen: set[tuple[str, str]] = set()
    for term in terms:
        ident = (term.transform, term.column.lower())
        if ident in seen:
            raise ValueError(f"partition term '{term}' appears twice")
        seen.add(ident)
    return terms
