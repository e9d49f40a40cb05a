"""The naming rules every landing zone shares, local folder or object prefix.

A zone's active files are the names directly at its root that are not hidden (`.x`), reserved (`_processed/`,
`_samples/`, any `_x`) or an editor's droppings (`~x`, `x~`, `.swp`, `.tmp`). A run that loaded files archives them
to `_processed/{run_id}/{name}`, which is also the name the ledger keeps for them from then on.
"""

from __future__ import annotations

PROCESSED = "_processed"
SAMPLES = "_samples"
RESERVED_DIRS = (PROCESSED, SAMPLES)


def is_active_name(name: str) -> bool:
    """Whether a name at a zone's root is a landing file the engine reads."""
    return bool(name) and "/" not in name and not name.startswith((".", "_", "~")) \
        and not name.endswith(("~", ".swp", ".tmp"))


def archived_name(run_id: str, name: str) -> str:
    """Where a run archives a file it loaded, relative to the zone."""
    return f"{PROCESSED}/{run_id}/{name}"


def is_archived_name(file: str) -> bool:
    return file.startswith(PROCESSED + "/")


def archived_run(file: str) -> str | None:
    """The run that archived `_processed/{run_id}/name` (None for any other name)."""
    parts = file.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == PROCESSED else None


def is_readable_archive(file: str) -> bool:
    """An archived file a run can read again: `_processed/{run_id}/{active name}`, nothing deeper."""
    parts = file.split("/")
    return len(parts) == 3 and parts[0] == PROCESSED and is_active_name(parts[2])
