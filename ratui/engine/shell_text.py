"""Commands as shell text: what the docs show a team (the commands that start its servers) and what the tests run
through bash, from one argv. A `$NAME` stays a variable that expands; anything else is quoted as needed."""

from __future__ import annotations

import re
import shlex


def word(value: str) -> str:
    """One shell word: a `$NAME` in it expands (double quotes where quotes are needed), anything else is quoted as
    needed."""
    if re.fullmatch(r"[\w@%+=:,./$-]+", value):
        return value
    if "$" in value:
        return '"' + re.sub(r'(["\\`])', r"\\\1", value) + '"'
    return shlex.quote(value)


def command(argv: list[str], breaks: tuple[str, ...] = ("--",)) -> str:
    """argv as one shell command, a new line (continued with a backslash) before each word that starts with one of
    `breaks` (an option and its value stay together)."""
    lines = [word(argv[0])]
    for w in argv[1:]:
        if w.startswith(breaks):
            lines.append("  " + word(w))
        else:
            lines[-1] += " " + word(w)
    return " \\\n".join(lines)


def exports(env: dict[str, str]) -> list[str]:
    return [f"export {k}={word(v)}" for k, v in env.items()]
