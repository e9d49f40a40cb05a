"""Naming rules shared by namespaces, pipelines and landing zones (the storage-layout rules)."""

from __future__ import annotations

import re

from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import LAYERS  # noqa: F401 - naming rules speak of layers

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
MAX_NAME = 128


def name_problem(name: str) -> str | None:
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long (at most {MAX_NAME})"
    if not NAME_RE.match(name):
        return "must match [a-z][a-z0-9_-]*"
    return None


def check_name(name: str, kind: str, file: str | None = None) -> None:
    problem = name_problem(name)
    if problem:
        raise RatuiError("RAT-PRJ-001", f"{kind} name '{name[:40]}' {problem}", file=file)


def sql_ident(*parts: str) -> str:
    """A Spark temp-view name for a table: names may hold '-', so quote with backticks."""
    return "`" + "__".join(parts).replace("`", "") + "`"
