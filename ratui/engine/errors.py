"""Every user-facing failure: a stable code, a one-line message, the file at fault and a hint.

The codes with their titles and hints live in errors.yaml beside this module. Codes are stable: scripts, the
JSON output and run records depend on them. Add new codes, never renumber. The families:

    RAT-PRJ-*   project tree and naming (discovery)
    RAT-CFG-*   pipeline configuration (annotations, config.yaml, ratui.yaml)
    RAT-TPL-*   templating (Jinja)
    RAT-DAG-*   dependency graph and node selection
    RAT-LND-*   landing zones
    RAT-S3-*    landing zones in S3-compatible object storage
    RAT-SQL-*   executing a pipeline or a quality test on Spark
    RAT-WRT-*   writing a table (merge strategies, schemas)
    RAT-CAT-*   the branch catalog
    RAT-UNDO-*  undo (`ratui undo`, `z` in the console)
    RAT-RUN-*   the run itself (cancellation, internal failures)
    RAT-RPR-*   the reaper (cleanup tasks)
    RAT-PTH-*   paths: nothing outside the project root unless ratui.yaml allows it
    RAT-SPK-*   reaching Spark (a cluster's master, a Spark Connect server)
    RAT-PY-*    Python pipelines
    RAT-CLI-*   command-line usage
    RAT-WEB-*   serving the console to a browser (ratui web)
    RAT-REST-*  ratui serve: the Iceberg REST catalog for other engines
    RAT-ACC-*   what a console may do (a read-only console)
    RAT-API-*   the Python API (`import ratui`, notebooks)
    RAT-LIN-*   column lineage (`ratui lineage`, the Lineage screen's column path)
    RAT-SCH-*   schedules (ratui.yaml, a pipeline's schedule) and the runner (`ratui up`)

A hint that names the entries of a list declared elsewhere (the write strategies) does not repeat them: it says
`${strategies}`, and the module that declares the list fills it in (`default_hint`; project/strategy_specs.py).
Every error reads the same wherever it is shown as plain text: `error_text`.
"""

from __future__ import annotations

import difflib
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

REGISTRY = Path(__file__).with_name("errors.yaml")


def _load_codes() -> dict[str, tuple[str, str]]:
    """code -> (title, default hint), from errors.yaml (family -> number -> title, hint)."""
    with open(REGISTRY, encoding="utf-8") as fh:
        families = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when present
    return {f"{family}-{number}": (entry["title"], entry["hint"])
            for family, entries in families.items() for number, entry in entries.items()}


# code -> (title, default hint). The title is what the code means; the message says what happened.
CODES: dict[str, tuple[str, str]] = _load_codes()


@dataclass
class RatuiError(Exception):
    """A coded, user-facing error. `file` and `line` point at what is at fault, when known."""

    code: str
    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unregistered error code {self.code}")
        if self.hint is None:
            self.hint = default_hint(self.code)
        super().__init__(self.message)

    @property
    def title(self) -> str:
        return CODES[self.code][0]

    @property
    def location(self) -> str | None:
        if not self.file:
            return None
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{self.code} {where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "hint": self.hint,
        }

    # what of `details` a --json refusal prints: names of refs, commits, tables, runs and files the message names
    # (never a URI, a sample row or anything else a secret or a user's data could be in)
    PUBLIC_DETAILS = ("commits", "entry", "files", "ref", "runs", "tables")

    def public_details(self) -> dict[str, Any]:
        return {k: v for k, v in (self.details or {}).items() if k in self.PUBLIC_DETAILS}

    def text(self, *, where: bool = False) -> str:
        """The error as plain text (error_text): its code and message, its place when `where`, its hint."""
        return error_text(self.code, self.message, self.hint, where=self.location if where else None)

    def render(self) -> str:
        """Two lines for a terminal: what and where, then the hint."""
        return error_text(f"error[{self.code}]", self.message, self.hint, where=self.location, hint_indent="  ")


def placeholders(code: str) -> tuple[str, ...]:
    """The ${words} of a code's hint in errors.yaml, which the module declaring their list fills in (a `$`, not
    braces: hints hold braces of their own, `{namespace}/landing/`)."""
    return tuple(string.Template(CODES[code][1]).get_identifiers())


def default_hint(code: str, **words: str) -> str:
    """A code's hint from errors.yaml, its ${words} filled in from `words` (see the module's docstring). A hint
    whose words are not all given is a mistake of the caller: ValueError, as for an unregistered code."""
    template = CODES[code][1]
    missing = [name for name in placeholders(code) if name not in words]
    if missing:
        raise ValueError(f"the hint of {code} names {', '.join(missing)}: raise it with the hint filled in by the "
                         "module that declares them")
    return string.Template(template).substitute(words) if words else template


def error_text(code: str, message: str, hint: str | None = None, *, where: str | None = None,
               hint_indent: str = "") -> str:
    """An error as plain text, wherever it is shown without styles (the command line, a notification, a log):
    `CODE where: message`, then `hint: ...` on a line of its own when there is a hint. `code` is the code as the
    place labels it (`error[RAT-CFG-001]` on the command line)."""
    head = f"{code} {where + ': ' if where else ''}{message}"
    return f"{head}\n{hint_indent}hint: {hint}" if hint else head


class ProjectErrors(Exception):
    """Several coded errors found at once (compile reports every problem, not only the first)."""

    def __init__(self, errors: Iterable[RatuiError]):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


# The families, classified once. A definition error means the pipeline's own files are at fault (not its data):
# a run failing with one does not count as an attempt against its landing files. A usage error is reported by a
# command before it runs anything (exit code 2).
DEFINITION_FAMILIES = ("RAT-TPL", "RAT-CFG", "RAT-PRJ", "RAT-DAG", "RAT-SCH")
USAGE_FAMILIES = ("RAT-PRJ", "RAT-CFG", "RAT-TPL", "RAT-DAG", "RAT-LND", "RAT-CLI", "RAT-PTH", "RAT-PY", "RAT-WEB",
                  "RAT-BKF",  # ratui backfill: its range and selection
                  "RAT-SCH",  # schedules: a bad cron, time zone or name (ratui.yaml, a pipeline)
                  "RAT-ALR",  # alerts: a bad rule or channel in ratui.yaml, a channel the project does not declare
                  "RAT-LIN",  # ratui lineage: a table or column name that names nothing
                  "RAT-REST")  # ratui serve: its option errors (its request errors never reach the command line)
USAGE_CODES = ("RAT-RUN-004", "RAT-ENG-005")  # RAT-ENG-005: a warm engine bound in ratui.yaml
# a failure of what the pipeline produced or read: its file is named when the error has no other place
PIPELINE_FAULT_FAMILIES = ("RAT-WRT", "RAT-SQL", "RAT-PY", "RAT-CFG", "RAT-TPL")


def is_definition_error(code: str) -> bool:
    return code.startswith(DEFINITION_FAMILIES)


def is_usage_error(code: str) -> bool:
    return code.startswith(USAGE_FAMILIES) or code in USAGE_CODES


def suggest(word: str, choices: Iterable[str]) -> str | None:
    """The nearest valid word, for 'did you mean' hints."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return match[0] if match else None


LISTED_UP_TO = 30  # a hint lists every valid word up to this many; above, only the close ones


def close_matches(word: str, choices: Iterable[str], limit: int = 3) -> list[str]:
    """The valid words nearest `word`, best first (at most `limit`; none when nothing is close)."""
    from rapidfuzz import fuzz, process

    found = process.extract(word, list(choices), scorer=fuzz.ratio, limit=limit, score_cutoff=60)
    return [match for match, _score, _index in found]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A hint naming the nearest valid words: all of them when there are few, else at most three close ones and
    how many there are (a project of thousands of tables must not get thousands of names per error)."""
    choices = list(dict.fromkeys(choices))
    if len(choices) <= LISTED_UP_TO:
        near = suggest(word, choices)
        valid = ", ".join(sorted(choices))
        return f"Did you mean '{near}'? Valid: {valid}." if near else f"Valid: {valid}."
    near_ones = close_matches(word, choices)
    if not near_ones:
        return f"None of the {len(choices):,} valid names is close to '{word}'."
    quoted = [f"'{n}'" for n in near_ones]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"Did you mean {listed}? ({len(choices):,} valid names; the closest are shown.)"
