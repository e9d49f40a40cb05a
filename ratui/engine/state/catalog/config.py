"""The `catalog:` section of ratui.yaml: which branch catalog a project uses, and opening it.

    catalog:                     # absent: the embedded catalog in .ratui/ratui.db (the zero-setup default)
      type: nessie               # project/catalog_specs.py's types: sqlite (the default) | nessie
      uri: http://HOST:19120/api/v2
      token: ...                 # optional bearer token; RATUI_NESSIE_TOKEN in the environment wins (ratui.yaml is
                                 # often shared, the environment is not)
      warehouse: /mnt/lake       # optional: the folder holding the tables ({namespace}/warehouse/{layer}/{name}/),
                                 # absolute or relative to the project; default the project folder. Installations
                                 # sharing one Nessie need one they all reach at the same path
                                 # or s3://bucket/prefix (with either catalog type), reached as catalog.s3 says:
      s3: {endpoint_url: ..., region: ..., path_style: true, profile: ...}

The settings schema (project/settings_schema.py CatalogSection) checks the section's shape at its line in ratui.yaml
and keeps it on `Settings.catalog`; `catalog_config` adds the rules across keys and the environment's token; the
catalog is its type's class (backends.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ratui.engine.errors import RatuiError
from ratui.engine.project import catalog_specs

if TYPE_CHECKING:
    from ratui.engine.state.catalog.base import BranchCatalog
    from ratui.engine.storage.warehouse import Warehouse

CATALOG_KEYS = {"type", "uri", "token", "warehouse", "s3"}
TOKEN_ENV = "RATUI_NESSIE_TOKEN"


@dataclass(frozen=True)
class CatalogConfig:
    type: str = catalog_specs.DEFAULT
    uri: str | None = None
    token: str | None = field(default=None, repr=False)  # never printed
    warehouse: str | None = None  # as written in ratui.yaml (None: the project folder)
    s3: dict[str, Any] = field(default_factory=dict, repr=False)  # catalog.s3: how to reach an s3:// warehouse

    @property
    def on_object_store(self) -> bool:
        return bool(self.warehouse) and "://" in (self.warehouse or "")


def catalog_config(raw: Any, *, file: str | None = None, env: Mapping[str, str] | None = None) -> CatalogConfig:
    """The `catalog:` mapping of ratui.yaml (None: the embedded default), validated (RAT-CFG-007 naming the key)."""
    env = os.environ if env is None else env
    if raw is None:
        return CatalogConfig()
    if not isinstance(raw, dict):
        raise RatuiError("RAT-CFG-007", "'catalog' must be a mapping (type, uri, token)", file=file)
    unknown = sorted(set(map(str, raw)) - CATALOG_KEYS)
    if unknown:
        raise RatuiError("RAT-CFG-002", f"unknown key catalog.{unknown[0]} (known: {', '.join(sorted(CATALOG_KEYS))})",
                         file=file)
    kind = str(raw.get("type") or catalog_specs.DEFAULT)
    if kind not in catalog_specs.NAMES:
        raise RatuiError("RAT-CFG-007", f"catalog.type must be one of {', '.join(catalog_specs.NAMES)}, not "
                         f"'{kind[:40]}'", file=file)
    spec = catalog_specs.BY_NAME[kind]
    uri = raw.get("uri")
    token = env.get(TOKEN_ENV) or raw.get("token")
    warehouse = raw.get("warehouse")
    s3 = dict(raw.get("s3") or {})
    on_store = isinstance(warehouse, str) and "://" in warehouse
    if not spec.server:
        if uri is not None or raw.get("token") is not None or (warehouse is not None and not on_store):
            raise RatuiError("RAT-CFG-007", "catalog.uri, catalog.token and a folder catalog.warehouse belong to type: "
                             f"{' or '.join(catalog_specs.SERVERS)} (the embedded catalog keeps its tables in the "
                             "project folder, or at an s3:// warehouse)", file=file)
        return CatalogConfig(kind, warehouse=warehouse if on_store else None, s3=s3)
    if not isinstance(uri, str) or not uri.startswith(("http://", "https://")):
        raise RatuiError("RAT-CFG-007", "catalog.uri must be Nessie's API v2 URL, e.g. http://HOST:19120/api/v2",
                         file=file)
    if token is not None and not isinstance(token, str):
        raise RatuiError("RAT-CFG-007", "catalog.token must be a string", file=file)
    if warehouse is not None and (not isinstance(warehouse, str) or not warehouse.strip()):
        raise RatuiError("RAT-CFG-007", "catalog.warehouse must be a folder path (absolute, or relative to the "
                         "project) or an s3://bucket/prefix URL", file=file)
    return CatalogConfig(kind, uri.rstrip("/"), token or None, warehouse, s3)


def warehouse_of(config: CatalogConfig, root: Path, *, file: str | None = None) -> Warehouse:
    """Where the project's tables are: an s3:// warehouse, or the folder tables_root() finds."""
    from ratui.engine.storage.warehouse import Warehouse, object_warehouse

    on_store = object_warehouse({"warehouse": config.warehouse, "s3": config.s3}, root)
    return on_store if on_store is not None else Warehouse(tables_root(config, root, file=file))


def tables_root(config: CatalogConfig, root: Path, *, file: str | None = None) -> Path:
    """The folder that holds the project's tables: catalog.warehouse (relative to the project root), or the project
    root. RAT-CFG-007 if the configured folder is not there (a shared mount that is not mounted)."""
    if not config.warehouse or config.on_object_store:
        return root
    folder = (root / os.path.expanduser(config.warehouse)).resolve()
    if not folder.is_dir():
        raise RatuiError("RAT-CFG-007", f"catalog.warehouse {folder} is not a folder", file=file,
                         hint="Create it, or mount the shared folder every installation of the project uses")
    return folder


def open_catalog(config: CatalogConfig, db_path: Path, root: Path,
                 allow_outside: tuple[Path, ...] = ()) -> BranchCatalog:
    """The project's branch catalog: the embedded one, or Nessie at `config.uri`."""
    return catalog_opener(config)(db_path, root, allow_outside)


def catalog_opener(config: CatalogConfig) -> Callable[[Path, Path, tuple[Path, ...]], BranchCatalog]:
    """`open_catalog` in two steps: the backend's module imported now, the catalog opened by the returned call (so a
    caller can import before it takes a lock and open under it)."""
    from ratui.engine.state.catalog.backends import backend

    chosen = backend(config.type)
    return lambda db_path, root, allow: chosen.opened(
        db_path=db_path, root=root, warehouse=warehouse_of(config, root, file=str(root / "ratui.yaml")),
        allow_outside=allow, uri=config.uri, token=config.token)
