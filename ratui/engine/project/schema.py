"""What the declarative schemas of ratui.yaml and of a pipeline's config share: YAML read with the line of every
key, the few field types ratui's files use, and pydantic's ValidationError told as one of ratui's coded errors.

The schemas themselves (settings_schema.py, config.py) say only what each key is. A field type that refuses a
value raises `invalid(...)`: its message says what is wrong in ratui's words, `{where}` standing for the key's
dotted path (which only the error's location knows), and may name a code other than the file's. Pydantic's own
messages are never shown as they are, and neither is the refused value unless a message names it on purpose:
a token or an S3 key in a file must not reach a terminal or a run record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from ratui.engine.errors import RatuiError, did_you_mean

Loc = tuple[str, ...]
# where a key was written: (file, line or None)
Locator = Callable[[Loc], tuple[str, int | None]]
UNKNOWN_KEY = "unknown_key"  # the error type of a key no schema declares (reported before any value's problem)


def invalid(message: str, code: str = "ratui", hint: str | None = None,
            at: str | tuple[str, ...] | None = None) -> PydanticCustomError:
    """A refusal in ratui's words. code "ratui": the file's own code; `at`: a key under the field, for its line."""
    # the message travels in the context, read back as it is: pydantic would fill in any {name} of the user's text
    return PydanticCustomError(code, "{message}", {"message": message, "hint": hint, "at": at})


@dataclass(frozen=True)
class YamlDoc:
    """A YAML file's data and the 1-based line of each key of its mappings, by the key's path."""

    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)

    def line(self, loc: Loc) -> int | None:
        """The line of the deepest key of `loc` the file holds (a default's error: its section's line)."""
        for end in range(len(loc), 0, -1):
            if loc[:end] in self.lines:
                return self.lines[loc[:end]]
        return None


def _key_lines(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                here = (*loc, str(key.value))
                out.setdefault(here, key.start_mark.line + 1)
                _key_lines(value, here, out)
    elif isinstance(node, yaml.SequenceNode):  # a list's items by index (ratui.yaml's schedules)
        for index, item in enumerate(node.value):
            here = (*loc, str(index))
            out.setdefault(here, item.start_mark.line + 1)
            _key_lines(item, here, out)


def read_yaml(path: Path, code: str) -> YamlDoc:
    """The file parsed as YAML (None when empty). A syntax error is `code` at its line; an unreadable file,
    RAT-PRJ-006."""
    try:
        loader = yaml.SafeLoader(path.read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RatuiError(code, f"YAML syntax error: {getattr(exc, 'problem', exc)}", file=str(path),
                         line=mark.line + 1 if mark else None) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RatuiError("RAT-PRJ-006", f"cannot read {path.name}: {exc}", file=str(path)) from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _key_lines(node, (), lines)
    return YamlDoc(data, lines)


def coded_error(exc: ValidationError, code: str, locate: Locator, root_name: str) -> RatuiError:
    """The first problem of a validation as ratui's error: an unknown key before any value's problem, at the file
    and line `locate` finds for its key. `code` for problems that name none; `root_name` names the whole file."""
    problems = sorted(exc.errors(), key=lambda e: e["type"] != UNKNOWN_KEY)  # stable: otherwise schema order
    problem = problems[0]
    loc = tuple(str(part) for part in problem["loc"] if part != "[key]")
    context = problem.get("ctx") or {}
    if context.get("at") is not None:
        at = context["at"]  # a key under the field, or a path of keys (a tuple)
        loc = (*loc, *(str(part) for part in at)) if isinstance(at, (tuple, list)) else (*loc, str(at))
    where = f"'{'.'.join(loc)}'" if loc else f"'{root_name}'"
    # pydantic's own message when a check of ours did not refuse: it never holds the value
    message = context.get("message") or f"{{where}} is not valid: {problem['msg']}"
    file, line = locate(loc)
    return RatuiError(problem["type"] if problem["type"].startswith("RAT-") else code,
                      message.replace("{where}", where), file=file, line=line, hint=context.get("hint"))


class Section(BaseModel):
    """A mapping of declared keys: an unknown one is refused with the nearest declared key; an empty section
    (`spark:` with nothing under it) is the defaults."""

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _declared_keys_only(cls, value: Any) -> Any:
        value = mapping(value)
        for key in value:
            if key not in cls.model_fields:
                raise invalid("unknown setting {where}", UNKNOWN_KEY, did_you_mean(str(key), cls.model_fields),
                              at=str(key))
        return value


def mapping(value: Any) -> dict:
    """A YAML mapping, None (a key with nothing under it) being an empty one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(f"{{where}} must be a mapping, got {type(value).__name__}")
    return value


def at_least(minimum: int, code: str = "ratui", hint: str | None = None) -> Callable[[Any], int]:
    """An integer >= minimum: YAML's true/false are not numbers, and neither is text. `code`: the refusal's code
    ("ratui": the file's own)."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise invalid(f"{{where}} must be an integer >= {minimum}, got {value!r}", code=code, hint=hint)
        return value

    return check


CHOICE = "{where} must be one of {choices}, got {value!r}"


def one_of(choices: Iterable[str], code: str = "ratui", message: str = CHOICE, fold: Callable[[str], str] = str.lower,
           hint: str | None = None) -> Callable[[Any], str]:
    """One of a few words, folded first (spaces around and, by default, case do not count); the nearest word is
    suggested. The message may name the value as written ({value!r}) or as folded ({text})."""
    words = tuple(choices)

    def check(value: Any) -> str:
        text = fold(str(value).strip())
        if text not in words:
            raise invalid(message.format(where="{where}", choices=", ".join(words), value=value, text=text), code,
                          hint=hint or did_you_mean(text, words))
        return text

    return check
