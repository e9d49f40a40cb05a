"""The user's own console settings (theme, ...), kept in the platform's user config folder, not in a project.

Linux: $XDG_CONFIG_HOME/ratui/console.yaml (~/.config/ratui/); macOS: ~/Library/Application Support/ratui/;
Windows: %APPDATA%\\ratui\\ (platformdirs, which Textual already depends on). A file that cannot be read is
ignored (defaults); one that cannot be written is not an error worth a crash either: the setting applies to this
session and the caller is told it was not saved.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("ratui.console.user")

FILE = "console.yaml"
KNOWN = {"theme"}


def config_dir() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("ratui", appauthor=False))


def load(folder: Path | None = None) -> dict[str, Any]:
    path = (folder or config_dir()) / FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        log.warning("ignoring unreadable %s", path)
        return {}
    return {k: v for k, v in data.items() if k in KNOWN and isinstance(v, str)} if isinstance(data, dict) else {}


def save(values: dict[str, Any], folder: Path | None = None) -> Path | None:
    """Merge `values` into the file; returns its path, or None when it could not be written."""
    folder = folder or config_dir()
    path = folder / FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        current = load(folder)
        current.update(values)
        partial = path.with_name(path.name + f".{os.getpid()}.tmp")
        partial.write_text(yaml.safe_dump(current, sort_keys=True), encoding="utf-8")
        os.replace(partial, path)
        return path
    except OSError:
        log.warning("could not save %s", path, exc_info=True)
        return None
