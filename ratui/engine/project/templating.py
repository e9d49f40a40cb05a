"""Jinja templating of pipelines and quality tests.

Two uses: a static read of the template (which tables and landing zones it names, found in the Jinja AST
so that refs inside `{% if is_incremental() %}` count too) for the dependency graph, and rendering with the
run's context. Undefined names are errors, and every error names the file and the line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import jinja2
from jinja2 import meta, nodes

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project.names import LAYERS, name_problem

# start / end: an incremental_by_time run's interval, [start, end), as ISO text in UTC ("2026-03-01T00:00:00", no
# zone: a TIMESTAMP in the session's zone, which is UTC); None in every other run
CONTEXT_NAMES = ("ref", "landing_zone", "this", "run_started_at", "watermark_value", "is_incremental", "is_scd2",
                 "start", "end")


def _env() -> jinja2.Environment:
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


def parse_ref(arg: str, default_namespace: str, file: str | None = None, line: int | None = None) -> str:
    """'layer.name' or 'namespace.layer.name' -> table key 'namespace.layer.name'."""
    parts = arg.split(".") if isinstance(arg, str) else []
    if len(parts) == 2:
        parts = [default_namespace, *parts]
    if len(parts) != 3 or parts[1] not in LAYERS or any(name_problem(p) for p in (parts[0], parts[2])):
        raise RatuiError("RAT-TPL-003", f"ref('{arg}') is not 'layer.name' or 'namespace.layer.name'", file=file,
                         line=line)
    return ".".join(parts)


@dataclass(frozen=True)
class StaticCalls:
    refs: tuple[str, ...]
    zones: tuple[str, ...]
    lines: dict[str, int] = field(default_factory=dict, compare=False)  # ref key / zone -> first line


def _check_names(env: jinja2.Environment, tree: nodes.Template, source: str, file: Path) -> None:
    """Undefined names and unknown filters or tests, found before anything runs (with their line)."""
    try:
        env.compile(source, filename=str(file))  # Jinja checks filter and test names when it compiles
    except jinja2.TemplateSyntaxError as exc:
        unknown = exc.message and exc.message.startswith(("No filter named", "No test named"))
        raise RatuiError("RAT-TPL-005" if unknown else "RAT-TPL-001",
                         f"template {'error' if unknown else 'syntax error'}: {exc.message}", file=str(file),
                         line=exc.lineno) from None
    for test in tree.find_all(nodes.Test):  # Jinja only looks tests up while rendering
        if test.name not in env.tests:
            raise RatuiError("RAT-TPL-005", f"template error: no test named '{test.name}'", file=str(file),
                             line=test.lineno, hint=did_you_mean(test.name, env.tests))
    known = set(CONTEXT_NAMES) | set(env.globals)
    undeclared = meta.find_undeclared_variables(tree) - known
    if undeclared:
        name = sorted(undeclared)[0]
        line = next((n.lineno for n in tree.find_all(nodes.Name) if n.name == name and n.ctx == "load"), None)
        raise RatuiError("RAT-TPL-002", f"undefined name in template: '{name}'", file=str(file), line=line,
                         hint=f"{did_you_mean(name, CONTEXT_NAMES)} (the names a template can use)")


def static_calls(text: str, file: Path, default_namespace: str) -> StaticCalls:
    """The ref() and landing_zone() calls of a template, which must have literal string arguments. Also
    rejects what Jinja would only find while rendering: undefined names, unknown filters and tests.

    One analysis per text: every compile (each run, each reload of the console) analyses every template, and
    parsing and checking one costs milliseconds."""
    calls, error = _static_calls(text, str(file), default_namespace)
    if error is not None:
        raise dataclasses.replace(error)  # a copy: callers may fill in details of the one they catch
    assert calls is not None
    return StaticCalls(calls.refs, calls.zones, dict(calls.lines))


@lru_cache(maxsize=1024)
def _static_calls(text: str, filename: str,
                  default_namespace: str) -> tuple[StaticCalls | None, RatuiError | None]:
    try:
        return _analyse(text, Path(filename), default_namespace), None
    except RatuiError as exc:
        return None, exc


def _analyse(text: str, file: Path, default_namespace: str) -> StaticCalls:
    env = _env()
    try:
        tree = env.parse(text, filename=str(file))
    except jinja2.TemplateSyntaxError as exc:
        raise RatuiError("RAT-TPL-001", f"template syntax error: {exc.message}", file=str(file),
                         line=exc.lineno) from None
    _check_names(env, tree, text, file)
    refs: list[str] = []
    zones: list[str] = []
    lines: dict[str, int] = {}
    for call in tree.find_all(nodes.Call):
        if not isinstance(call.node, nodes.Name) or call.node.name not in ("ref", "landing_zone"):
            continue
        fn = call.node.name
        if len(call.args) != 1 or not isinstance(call.args[0], nodes.Const) or not isinstance(call.args[0].value, str):
            code = "RAT-TPL-003" if fn == "ref" else "RAT-TPL-004"
            raise RatuiError(code, f"{fn}() needs one literal string argument", file=str(file), line=call.lineno,
                             hint=f"Write {fn}('...') with the name spelled out: the dependency graph is read "
                             "from the template before it runs.")
        value = call.args[0].value
        if fn == "ref":
            key = parse_ref(value, default_namespace, str(file), call.lineno)
            if key not in refs:
                refs.append(key)
                lines[key] = call.lineno
        elif value not in zones:
            zones.append(value)
            lines[value] = call.lineno
    return StaticCalls(tuple(refs), tuple(zones), lines)


def line_mapper(template: str, rendered: str) -> Callable[[int], int]:
    """Rendered SQL line -> template line. Lines without Jinja come through rendering unchanged, so a diff of
    the two texts anchors them; a line inside a changed stretch maps to that stretch's template lines."""
    import difflib

    t_lines, r_lines = template.splitlines(), rendered.splitlines()
    blocks = difflib.SequenceMatcher(None, t_lines, r_lines, autojunk=False).get_opcodes()

    def to_template(line: int) -> int:
        index = line - 1
        for tag, t1, t2, r1, r2 in blocks:
            if r1 <= index < r2:
                if tag == "equal":
                    return t1 + (index - r1) + 1
                if t1 == t2:
                    return max(1, t1)
                # the template line of the stretch that reads most like the rendered one
                text = r_lines[index]
                scores = [(difflib.SequenceMatcher(None, t_lines[t], text).ratio(), -t) for t in range(t1, t2)]
                return -max(scores)[1] + 1
        return max(1, min(line, len(t_lines)))

    return to_template


def _template_line(exc: BaseException, filename: str) -> int | None:
    """Jinja rewrites tracebacks so template frames carry the template's file name and line."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class EngineCallFailed(Exception):
    """An unexpected failure inside ref() / landing_zone() (reading a table or a zone): the engine's own, not a
    template error, so render() lets the original exception through."""

    def __init__(self, original: BaseException):
        super().__init__(str(original))
        self.original = original


def _engine_call(fn: Callable[[str], str]) -> Callable[[str], str]:
    def call(name: str) -> str:
        try:
            return fn(name)
        except RatuiError:
            raise
        except Exception as exc:
            raise EngineCallFailed(exc) from exc

    return call


@dataclass
class TemplateContext:
    ref: Callable[[str], str]
    landing_zone: Callable[[str], str]
    this: str
    run_started_at: str
    watermark_value: Any
    is_incremental: bool
    is_scd2: bool
    start: str | None = None
    end: str | None = None

    def as_globals(self) -> dict[str, Any]:
        return {
            "ref": _engine_call(self.ref),
            "landing_zone": _engine_call(self.landing_zone),
            "this": self.this,
            "run_started_at": self.run_started_at,
            "watermark_value": self.watermark_value,
            "is_incremental": _Flag(self.is_incremental),
            "is_scd2": _Flag(self.is_scd2),
            "start": self.start,
            "end": self.end,
        }


class _Flag:
    """`is_incremental()` as documented, and `is_incremental` without the call too: a bare function would be true
    in `{% if is_incremental %}` on every run, silently (a first run reading only the increment)."""

    def __init__(self, value: bool):
        self.value = bool(value)

    def __call__(self) -> bool:
        return self.value

    def __bool__(self) -> bool:
        return self.value

    def __str__(self) -> str:
        return "true" if self.value else "false"


@lru_cache(maxsize=1024)
def _template(text: str, filename: str) -> jinja2.Template:
    """The compiled template of a file's text (compiling costs milliseconds; every run and compile renders)."""
    env = _env()
    # A loader (not from_string) so that tracebacks carry the file name and the template's line numbers.
    env.loader = jinja2.FunctionLoader(lambda name: (text, filename, lambda: True))
    return env.get_template(filename)


def render(text: str, file: Path, context: TemplateContext) -> str:
    filename = str(file)
    try:
        template = _template(text, filename)
    except jinja2.TemplateSyntaxError as exc:
        raise RatuiError("RAT-TPL-001", f"template syntax error: {exc.message}", file=filename,
                         line=exc.lineno) from None
    try:
        return template.render(**context.as_globals())
    except EngineCallFailed as exc:
        raise exc.original from None
    except RatuiError as exc:
        # raised by ref()/landing_zone() themselves: add the template line
        if exc.line is None and exc.file in (None, filename):  # an error about another file keeps its own place
            exc.line = _template_line(exc, filename)
            exc.file = filename
        raise
    except jinja2.UndefinedError as exc:
        raise RatuiError("RAT-TPL-002", f"undefined name in template: {exc.message}", file=filename,
                         line=_template_line(exc, filename)) from None
    except jinja2.TemplateError as exc:
        raise RatuiError("RAT-TPL-004", f"template error: {exc}", file=filename,
                         line=_template_line(exc, filename)) from None
    except Exception as exc:  # an exception inside a template expression (e.g. 1/0, a bad filter argument)
        line = _template_line(exc, filename)
        raise RatuiError("RAT-TPL-004", f"template error: {type(exc).__name__}: {exc}", file=filename,
                         line=line) from None
