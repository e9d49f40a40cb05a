"""The branch catalog backends: catalog.type -> its BranchCatalog class, one entry per type project/catalog_specs.py
declares (and no other: this module refuses to import otherwise). A class is imported when a project opens a
catalog of its type (the embedded one pulls in PyIceberg's SQL catalog, Nessie's its HTTP client)."""

from __future__ import annotations

from typing import Callable

from ratui.engine.project import catalog_specs
from ratui.engine.state.catalog.base import BranchCatalog


def _sqlite() -> type[BranchCatalog]:
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    return SqliteBranchCatalog


def _nessie() -> type[BranchCatalog]:
    from ratui.engine.state.catalog.nessie import NessieBranchCatalog

    return NessieBranchCatalog


BACKENDS: dict[str, Callable[[], type[BranchCatalog]]] = {
    "sqlite": _sqlite,
    "nessie": _nessie,
}
if tuple(BACKENDS) != catalog_specs.NAMES:
    raise RuntimeError(f"state/catalog/backends.py has {sorted(BACKENDS)}, catalog_specs.py declares "
                       f"{sorted(catalog_specs.NAMES)}")


def backend(type_name: str) -> type[BranchCatalog]:
    """The class of a catalog type (one catalog_config accepted)."""
    return BACKENDS[type_name]()
