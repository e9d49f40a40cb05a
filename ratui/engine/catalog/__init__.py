"""The branch catalog: refs, commits and per-ref Iceberg table pointers with Nessie's semantics.

`BranchCatalog` is the interface; `SqliteBranchCatalog` keeps it in the project's SQLite database.
"""

from .base import MAIN, BranchCatalog, Commit, MergeResult, Ref, TableChange, split_key
from .sqlite import SqliteBranchCatalog

__all__ = [
    "MAIN",
    "BranchCatalog",
    "Commit",
    "MergeResult",
    "Ref",
    "SqliteBranchCatalog",
    "TableChange",
    "split_key",
]
