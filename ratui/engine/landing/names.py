"""The naming rules every landing zone shares, local folder or object prefix.

A zone's active files are the names directly at its root that are not hidden (`.x`), reserved (`_processed/`,
`_samples/`, any `_x`) or an editor's droppings (`~x`, `x~`, `.swp`, `.tmp`). A run that loaded files archives them
to `_processed/{run_id}/{name}`, which is also the name the ledger keeps for them from then on.
"""

from __future__ import annotations

from ratui.engine.errors import RatuiError

PROCESSED = "_processed"
SAMPLES = "_samples"
RESERVED_DIRS = (PROCESSED, SAMPLES)


INACTIVE_STARTS = (".", "_", "~")  # hidden, reserved, an editor's
INACTIVE_ENDS = ("~", ".swp", ".tmp")  # an editor's droppings


def is_active_name(name: str) -> bool:
    """Whether a name at a zone's root is a landing file the engine reads."""
    return bool(name) and "/" not in name and not name.startswith(INACTIVE_STARTS) \
        and not name.endswith(INACTIVE_ENDS)


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


def check_file_name(name: str, zone: str, where: str) -> None:
    """RAT-LND-012 unless a landing file's name is one the ledger, Spark and a terminal can all carry: valid UTF-8
    (os.scandir hands undecodable bytes back as surrogates, which SQLite cannot store) with no line break or other
    control character (an object key may have them too). `where` is what the error names: the zone's folder or
    URL."""
    if name.isprintable():
        return
    shown = ascii(name)
    if any("\udc80" <= c <= "\udcff" for c in name):
        raise RatuiError("RAT-LND-012", f"landing file {shown} in zone '{zone}' has a name that is not valid UTF-8",
                         file=where)
    if any(c in "\n\r" or (ord(c) < 32) or ord(c) == 127 for c in name):
        raise RatuiError("RAT-LND-012", f"landing file {shown} in zone '{zone}' has a line break or control "
                         "character in its name", file=where)
