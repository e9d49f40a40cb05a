"""The branch catalog: refs, commits and per-ref Iceberg table pointers with Nessie's semantics.

`BranchCatalog` is the interface; `SqliteBranchCatalog` keeps it in the project's SQLite database.
"""

from ratui.engine.state.catalog.base import MAIN, BranchCatalog, Commit, MergeResult, Ref, TableChange, split_key


def __getattr__(name: str):
    # the SQLite backend pulls in PyIceberg (about a second): load it only when someone asks for it
    if name == "SqliteBranchCatalog":
        from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

        return SqliteBranchCatalog
    raise AttributeError(name)


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
