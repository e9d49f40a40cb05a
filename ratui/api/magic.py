"""IPython magics: `%load_ext ratui`, then

    %ratui_open path/to/project          # the project the magics use (also returned: p = %ratui_open PATH)
    %%ratui_sql dev --limit 1000          # the cell's SELECT on ref dev: an Arrow table (--pandas: a DataFrame)

IPython is imported only by IPython itself: this module's functions receive the shell it loaded them into.
"""

from __future__ import annotations

import shlex
from typing import Any

from ratui.engine.errors import RatuiError

USAGE = "%%ratui_sql [REF] [--at TIME] [--pandas] [--limit N]"


class _State:
    project: Any = None


STATE = _State()


def ratui_open(line: str):
    from ratui.api.project import open as open_project

    path = line.strip().strip("\"'") or "."
    if STATE.project is not None and not STATE.project.closed:
        STATE.project.close()
    STATE.project = open_project(path)
    return STATE.project


def _options(line: str) -> dict[str, Any]:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise RatuiError("RAT-API-006", f"cannot read the magic's line {line!r}: {exc}; usage: {USAGE}") from None
    out: dict[str, Any] = {"ref": "main", "at": None, "pandas": False, "limit": None}
    refs = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--pandas":
            out["pandas"] = True
        elif word in ("--limit", "--at"):
            if i + 1 >= len(words):
                raise RatuiError("RAT-API-006", f"{word} needs a value; usage: {USAGE}")
            value = words[i + 1]
            if word == "--limit":
                if not value.isdigit():
                    raise RatuiError("RAT-API-006", f"--limit takes a whole number, got {value!r}; usage: {USAGE}")
                out["limit"] = int(value)
            else:
                out["at"] = value
            i += 1
        elif word.startswith("-"):
            raise RatuiError("RAT-API-006", f"unknown option {word}; usage: {USAGE}")
        else:
            refs.append(word)
        i += 1
    if len(refs) > 1:
        raise RatuiError("RAT-API-006", f"one ref at most, got {', '.join(refs)}; usage: {USAGE}")
    if refs:
        out["ref"] = refs[0]
    return out


def ratui_sql(line: str, cell: str):
    options = _options(line)
    project = STATE.project
    if project is None or project.closed:
        raise RatuiError("RAT-API-006", "no project is open for %%ratui_sql: run `%ratui_open PATH` first")
    if not cell.strip():
        raise RatuiError("RAT-API-006", f"the cell holds no SQL; usage: {USAGE}")
    query = project.sql(cell, ref=options["ref"], at=options["at"])
    return query.to_pandas(options["limit"]) if options["pandas"] else query.to_arrow(options["limit"])


def load_ipython_extension(shell: Any) -> None:
    """`%load_ext ratui`: registers %ratui_open and %%ratui_sql in `shell`."""
    shell.register_magic_function(ratui_open, magic_kind="line", magic_name="ratui_open")
    shell.register_magic_function(ratui_sql, magic_kind="cell", magic_name="ratui_sql")


def unload_ipython_extension(shell: Any) -> None:
    if STATE.project is not None and not STATE.project.closed:
        STATE.project.close()
    STATE.project = None
