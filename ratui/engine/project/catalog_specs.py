"""The branch catalog backends (ratui.yaml's catalog.type), declared once: what each needs of the `catalog:` section.
The settings schema (settings_schema.py CatalogSection) accepts these types and checks the section by these specs;
state/catalog/backends.py maps each type to its class (and refuses to import when one has none); the reference of
ratui.yaml's keys reads them.

Adding a backend: a CatalogSpec line here and its class in state/catalog/backends.py's BACKENDS, a BranchCatalog
with an `opened` classmethod (tests/engine/test_declared_lists.py fails until both are there)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogSpec:
    name: str
    server: bool  # a server at catalog.uri (an http:// or https:// URL, required), with catalog.token
    folder_warehouse: bool  # catalog.warehouse may be a folder every installation reaches (any type takes s3://)
    summary: str


SPECS = (
    CatalogSpec("sqlite", server=False, folder_warehouse=False,
                summary="the embedded catalog in the project's .ratui/ratui.db (the zero-setup default)"),
    CatalogSpec("nessie", server=True, folder_warehouse=True,
                summary="a Nessie server (its REST API v2 at catalog.uri): what a team shares"),
)
BY_NAME = {spec.name: spec for spec in SPECS}
NAMES = tuple(BY_NAME)
DEFAULT = "sqlite"
SERVERS = tuple(spec.name for spec in SPECS if spec.server)  # the types catalog.uri and catalog.token belong to
FOLDER_WAREHOUSES = tuple(spec.name for spec in SPECS if spec.folder_warehouse)  # a folder catalog.warehouse's


def types_named(names: tuple[str, ...]) -> str:
    """Types as a message names them: 'catalog.type: nessie'."""
    return " or ".join(f"'catalog.type: {name}'" for name in names)
