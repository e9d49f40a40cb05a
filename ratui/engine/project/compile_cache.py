"""The compile cache: what compiling a pipeline found, kept under `.ratui/compile-cache.json`, keyed by content.

Compiling a pipeline (resolving its configuration, reading its template for refs and landing zones, checking its
SQL for direct table names, the same for its quality tests) depends only on its files' contents and names, the
project's settings file and ratui's own compiler code. An entry's key is a hash of exactly those, so a pipeline
whose files did not change since the last compile is not parsed or rendered again; an edit, a renamed file, a new
ratui.yaml or a newer ratui makes a new key. What is not a matter of content is never cached and is checked on every
compile: that a file is readable and inside the project (discovery), and that a landing zone exists and stays
inside the project (compiler).

The file is JSON (never pickle: opening a project must not run code from it), read once, written once per compile
when something changed (to a temporary file, then renamed: a concurrent compile sees the old or the new file),
and holds only the entries the last compile used (a deleted pipeline's entry goes). A file that cannot be read or
parsed is an empty cache; one that cannot be written is no cache. Entries are validated as they are read: a value
of the wrong shape is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.project.config import PipelineConfig
from ratui.engine.project.freshness_terms import Freshness

FORMAT = 1
FILE = "compile-cache.json"

# the modules whose code decides what a compile finds: a change to any of them (a newer ratui, an edit in a
# development checkout) changes every key
_CODE = ("compiler.py", "compile_cache.py", "config.py", "discovery.py", "freshness_terms.py", "names.py",
         "partition_terms.py",
         "python_source.py", "schema.py", "sql_names.py", "strategy_specs.py", "templating.py", "../errors.yaml")


def _code_fingerprint() -> str:
    here = Path(__file__).parent
    digest = hashlib.sha256(str(FORMAT).encode())
    for name in _CODE:
        try:
            stat = os.stat(here / name)
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        except OSError:
            digest.update(f"{name}:-".encode())
    return digest.hexdigest()


def config_to_json(config: PipelineConfig) -> dict[str, Any]:
    return {f.name: list(value) if isinstance(value, tuple) else asdict(value) if isinstance(value, Freshness)
            else value for f in fields(config) for value in (getattr(config, f.name),)}


def config_from_json(data: Any) -> PipelineConfig:
    """A configuration as resolve_config() made it (lists back to tuples); TypeError/ValueError if not one."""
    if not isinstance(data, dict) or not isinstance(data.get("origin", {}), dict):
        raise ValueError("not a configuration")
    names = {f.name for f in fields(PipelineConfig)}
    if not set(data) <= names:
        raise ValueError("unknown configuration keys")
    values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    if isinstance(values.get("freshness"), dict):
        values["freshness"] = Freshness(**values["freshness"])
    return PipelineConfig(**values)


def error_to_json(error: RatuiError) -> dict[str, Any]:
    details = error.details if _jsonable(error.details) else {}
    return {"code": error.code, "message": error.message, "file": error.file, "line": error.line,
            "hint": error.hint, "details": details}


def error_from_json(data: Any) -> RatuiError:
    if not isinstance(data, dict):
        raise ValueError("not an error")
    line, details = data.get("line"), data.get("details")
    return RatuiError(str(data["code"]), str(data["message"]), file=_opt_str(data.get("file")),
                      line=line if isinstance(line, int) else None, hint=_opt_str(data.get("hint")),
                      details=details if isinstance(details, dict) else {})


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


@dataclass
class Entry:
    """What a compile found for one pipeline: its configuration (or the error resolving it) from discovery, and
    its refs, zones and quality tests' refs (or the error reading them) from the compiler."""

    config: dict[str, Any] | None = None
    config_error: dict[str, Any] | None = None
    compiled: bool = False
    refs: list[str] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    ref_lines: dict[str, int] = field(default_factory=dict)
    test_refs: list[list[Any]] = field(default_factory=list)  # [key, test file, line]
    test_zones: list[list[str]] = field(default_factory=list)  # [zone, test file]
    error: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Any) -> "Entry":
        if not isinstance(data, dict):
            raise ValueError("not an entry")
        entry = cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
        for name, kind in (("refs", list), ("zones", list), ("ref_lines", dict), ("test_refs", list),
                           ("test_zones", list)):
            if not isinstance(getattr(entry, name), kind):
                raise ValueError(f"{name} is not a {kind.__name__}")
        return entry


class CompileCache:
    def __init__(self, path: Path | None, salt: str, entries: dict[str, Any]):
        self.path = path
        self._salt = salt
        self._stored = entries  # key -> raw JSON entry, as read
        self._used: dict[str, Entry] = {}
        self._changed = False
        self.hits = 0
        self.misses = 0

    @classmethod
    def open(cls, root: Path, settings_file: Path | None = None) -> "CompileCache":
        """The project's cache (empty if there is none or it cannot be read)."""
        settings_file = settings_file or root / "ratui.yaml"
        salt = hashlib.sha256(_code_fingerprint().encode())
        salt.update(str(root).encode() + b"\0")
        try:
            salt.update(settings_file.read_bytes())
        except OSError:
            salt.update(b"-")
        path = root / ".ratui" / FILE
        entries: dict[str, Any] = {}
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            if isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("entries"), dict):
                entries = data["entries"]
        except (OSError, ValueError):
            pass
        return cls(path, salt.hexdigest(), entries)

    def key(self, parts: list[bytes]) -> str:
        digest = hashlib.sha256(self._salt.encode())
        for part in parts:
            digest.update(len(part).to_bytes(8, "little") + part)
        return digest.hexdigest()[:32]

    def get(self, key: str) -> Entry:
        """The entry of `key`: the stored one (a hit), else a new empty one that this compile fills."""
        entry = self._used.get(key)
        if entry is not None:
            return entry
        raw = self._stored.get(key)
        if raw is not None:
            try:
                entry = Entry.from_json(raw)
                self.hits += 1
            except (TypeError, ValueError, KeyError):
                entry = None
        if entry is None:
            entry = Entry()
            self.misses += 1
            self._changed = True
        self._used[key] = entry
        return entry

    def touched(self) -> None:
        """An entry got filled in: the file is written at save()."""
        self._changed = True

    def save(self, *, whole: bool = True) -> None:
        """Write the entries this compile used (never raises: a cache that cannot be written is no cache).
        `whole`: this compile saw every pipeline, so what it did not use goes; a compile of a few pipelines
        (recompile) keeps the others' entries."""
        if self.path is None or not (self._changed or whole and set(self._stored) != set(self._used)):
            return
        kept = {} if whole else dict(self._stored)
        entries = {**kept, **{key: entry.to_json() for key, entry in self._used.items()}}
        data = {"format": FORMAT, "entries": entries}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".compile-cache-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(data, fh, separators=(",", ":"))
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return
        self._stored = entries
        self._changed = False
        remove_leftovers(self.path.parent)


LEFTOVER_PREFIXES = (".compile-cache-", ".outline-")  # temporary files of a write that was killed before its rename
LEFTOVER_AGE = 3600.0  # seconds: older than any write in flight


def remove_leftovers(folder: Path, now: float | None = None) -> None:
    """Remove temporary files a compile killed mid-write left in `folder` (`.ratui/`), once they are an hour old
    (a younger one may be another compile's write in flight). Never raises."""
    import time

    now = time.time() if now is None else now
    try:
        with os.scandir(folder) as scan:
            for item in scan:
                if item.name.startswith(LEFTOVER_PREFIXES) and item.is_file(follow_symlinks=False):
                    try:
                        if now - item.stat(follow_symlinks=False).st_mtime > LEFTOVER_AGE:
                            os.unlink(item.path)
                    except OSError:
                        pass
    except OSError:
        pass
