"""Reading Spark's errors: the line of the SQL text they point at, and a first line fit for a person."""

from __future__ import annotations

import re

_POSITION = re.compile(r"line (\d+),? pos(?:ition)? (\d+)")
_POSITION_TEXT = re.compile(r"\s*\(line \d+, pos \d+\)|;? line \d+ pos \d+;?")
# a Spark Connect error the client has no class for names the server's: "(org.apache.spark.SparkException) [...]"
_SERVER_CLASS = re.compile(r"^\((?:[a-z_][\w]*\.)+[A-Z]\w*\)\s*")


def error_line(exc: BaseException) -> int | None:
    """The line of the SQL text a Spark error points at (parse, analysis and execution errors all say it)."""
    match = _POSITION.search(str(getattr(exc, "desc", None) or exc))
    return int(match.group(1)) if match else None


def error_message(exc: BaseException) -> str:
    """The first meaningful line of a Spark error (Py4J's or Spark Connect's), without the JVM stack, the server's
    class name or the position (which refers to the rendered SQL; callers report the template's own line)."""
    text = str(getattr(exc, "desc", None) or exc)
    for line in text.splitlines():
        line = _SERVER_CLASS.sub("", line.strip())
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback", "==")):
            return _POSITION_TEXT.sub("", line).strip()[:500]
    return type(exc).__name__
