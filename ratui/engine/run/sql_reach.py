"""What a SQL pipeline may not reach for: the data side's rules (docs/concepts/isolation.md, "The data side").

A pipeline reads tables through ref() and files through landing zones. Spark's SQL also has functions that call
any static Java method (`reflect`, `java_method`, `try_reflect`: enough to read the JVM's environment, its
secrets included) or read any path (`read_files`), and a clause that runs a program (`TRANSFORM ... USING`).
A SQL pipeline using one fails with RAT-ISO-006 at the line, before Spark sees it. ratui's own JVM also runs
with Spark's restricted mode, which refuses the same at analysis (spark/session.py); this check says so first,
with the file and line, and covers a Spark ratui did not start. File paths as tables are refused when the
pipeline compiles (RAT-DAG-006).
"""

from __future__ import annotations

import logging
import re
from typing import Callable

import sqlglot
from sqlglot import exp

from ratui.engine.errors import RatuiError
from ratui.engine.run.read_only_sql import _function_name

CODE = "RAT-ISO-006"
REACHING_FUNCTIONS = ("reflect", "java_method", "try_reflect", "read_files")


def check_pipeline_sql(sql: str, file: str, to_template: Callable[[int], int] | None = None) -> None:
    """Raise RAT-ISO-006 at its line when the rendered SQL of a pipeline calls outside the data."""
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        statements = sqlglot.parse(sql, read="spark")
    except Exception:  # Spark may read what sqlglot cannot: the words themselves are looked for instead
        statements = []
    finally:
        quiet.setLevel(level)
    found: str | None = None
    for statement in statements:
        if statement is None:
            continue
        for node in statement.walk():
            name = _function_name(node)
            if name in REACHING_FUNCTIONS:
                found = name
                break
            if isinstance(node, exp.QueryTransform):
                found = "TRANSFORM ... USING"
                break
        if found:
            break
    if found is None and not statements:
        found = next((name for name in REACHING_FUNCTIONS if re.search(rf"\b{name}\s*\(", sql, re.I)), None)
    if found is None:
        return
    word = "TRANSFORM" if found.startswith("TRANSFORM") else found
    line = next((n for n, text in enumerate(sql.splitlines(), start=1) if re.search(rf"\b{word}\b", text, re.I)),
                None)
    if line is not None and to_template is not None:
        line = to_template(line)
    what = "runs a program" if word == "TRANSFORM" else (
        "reads any path" if found == "read_files" else "calls any Java method (the JVM's environment, its secrets)")
    raise RatuiError(CODE, f"{found} {what}: a pipeline reaches data through ref() and landing_zone()", file=file,
                     line=line)
