"""What a Python pipeline reads, found without running it: its ref() and landing_zone() calls (Python's AST).

Like the SQL templates' (templating.py), the calls must have literal string arguments so the dependency graph is
known before anything runs. A syntax error and a missing run(ctx) are compile errors with the line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ratui.engine.errors import RatuiError
from ratui.engine.project.templating import StaticCalls, parse_ref

def static_calls_python(text: str, file: Path, default_namespace: str) -> StaticCalls:
    try:
        tree = ast.parse(text, filename=str(file))
    except SyntaxError as exc:
        raise RatuiError("RAT-PY-002", f"Python syntax error: {exc.msg}", file=str(file), line=exc.lineno) from None
    has_run = any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body)
    if not has_run:
        raise RatuiError("RAT-PY-003", "pipeline.py defines no run(ctx) function", file=str(file))
    refs: list[str] = []
    zones: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in ("ref", "landing_zone"):
            continue
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
            raise RatuiError("RAT-TPL-003" if name == "ref" else "RAT-TPL-004",
                             f"{name}() needs one literal string argument", file=str(file), line=node.lineno)
        value = node.args[0].value
        if name == "ref":
            key = parse_ref(value, default_namespace, str(file), node.lineno)
            if key not in refs:
                refs.append(key)
        elif value not in zones:
            zones.append(value)
    return StaticCalls(tuple(refs), tuple(zones))
