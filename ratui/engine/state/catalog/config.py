"""The `catalog:` section of ratui.yaml: which branch catalog a project uses, and opening it.

    catalog:                     # absent: the embedded catalog in .ratui/ratui.db (the zero-setup default)
      type: nessie               # sqlite (the default) | nessie
      uri: http://HOST:19120/api/v2
      token: ...                 # optional bearer token; RATUI_NESSIE_TOKEN in the environment wins (ratui.yaml is
                                 # often shared, the environment is not)

Parsed here, on its own, while settings.py is being rewritten into one declarative schema. Until that lands,
project_state.py reads the section from the raw ratui.yaml (`read_catalog_config`); note that today's settings.py
still refuses an unknown top-level key, so a ratui.yaml with `catalog:` needs "catalog" among its TOP_KEYS. Once the
schema exists, it should declare `catalog` as a mapping with exactly these keys, call `catalog_config(raw_section)`
to validate it (or declare the same rules), and keep the result on Settings (`settings.catalog`), which
project_state.py then hands to `open_catalog` instead of reading the file itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ratui.engine.errors import RatuiError

if TYPE_CHECKING:
    from ratui.engine.state.catalog.base import BranchCatalog

CATALOG_KEYS = {"type", "uri", "token"}
TYPES = ("sqlite", "nessie")
TOKEN_ENV = "RATUI_NESSIE_TOKEN"


@dataclass(frozen=True)
class CatalogConfig:
    type: str = "sqlite"
    uri: str | None = None
    token: str | None = field(default=None, repr=False)  # never printed


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
    kind = str(raw.get("type") or "sqlite")
    if kind not in TYPES:
        raise RatuiError("RAT-CFG-007", f"catalog.type must be one of {', '.join(TYPES)}, not '{kind[:40]}'",
                         file=file)
    uri = raw.get("uri")
    token = env.get(TOKEN_ENV) or raw.get("token")
    if kind == "sqlite":
        if uri is not None or raw.get("token") is not None:
            raise RatuiError("RAT-CFG-007", "catalog.uri and catalog.token belong to type: nessie", file=file)
        return CatalogConfig()
    if not isinstance(uri, str) or not uri.startswith(("http://", "https://")):
        raise RatuiError("RAT-CFG-007", "catalog.uri must be Nessie's API v2 URL, e.g. http://HOST:19120/api/v2",
                         file=file)
    if token is not None and not isinstance(token, str):
        raise RatuiError("RAT-CFG-007", "catalog.token must be a string", file=file)
    return CatalogConfig("nessie", uri.rstrip("/"), token or None)


def read_catalog_config(root: Path) -> CatalogConfig:
    """The section as ratui.yaml holds it now (the settings loader has already checked the file is valid YAML)."""
    import yaml

    path = Path(root) / "ratui.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return CatalogConfig()
    return catalog_config(raw.get("catalog") if isinstance(raw, dict) else None, file=str(path))


def open_catalog(config: CatalogConfig, db_path: Path, root: Path,
                 allow_outside: tuple[Path, ...] = ()) -> BranchCatalog:
    """The project's branch catalog: the embedded one, or Nessie at `config.uri`."""
    return catalog_opener(config)(db_path, root, allow_outside)


def catalog_opener(config: CatalogConfig) -> Callable[[Path, Path, tuple[Path, ...]], BranchCatalog]:
    """`open_catalog` in two steps: the backend's module imported now, the catalog opened by the returned call (so a
    caller can import before it takes a lock and open under it)."""
    if config.type == "nessie":
        from ratui.engine.state.catalog.nessie import NessieBranchCatalog

        uri = config.uri or ""
        return lambda db_path, root, allow: NessieBranchCatalog(uri, db_path, root, token=config.token,
                                                                allow_outside=allow)
    from ratui.engine.state.catalog.sqlite import SqliteBranchCatalog

    return lambda db_path, root, allow: SqliteBranchCatalog(db_path, root, allow)
