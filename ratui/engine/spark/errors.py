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
    rpc = _rpc_failure(exc)
    if rpc is not None:
        return rpc
    text = str(getattr(exc, "desc", None) or exc)
    java = _java_failure(text)
    if java is not None:
        return java
    for line in text.splitlines():
        line = _SERVER_CLASS.sub("", line.strip())
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback", "==")):
            return _POSITION_TEXT.sub("", line).strip()[:500]
    return type(exc).__name__


_RPC_TEXT = re.compile(r"status = StatusCode\.(\w+).*?details = \"(.*?)\"", re.S)


def _rpc_failure(exc: BaseException) -> str | None:
    """A gRPC failure of the Spark Connect client (the server gone, a call that gave up), in words: its status and
    details, not the call object's text ("<_MultiThreadedRendezvous of RPC that terminated with: ...")."""
    status: str | None = None
    text = ""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details) and type(exc).__module__.split(".")[0] == "grpc":
        try:
            status, text = getattr(code(), "name", str(code())), str(details() or "")
        except Exception:
            pass
    if status is None:
        match = _RPC_TEXT.search(str(exc))
        if match is None or not str(exc).lstrip().startswith("<_"):
            return None
        status, text = match.group(1), match.group(2)
    prefix = "Spark Connect server unreachable" if status == "UNAVAILABLE" else "Spark Connect call failed"
    return f"{prefix} ({status}): {' '.join(text.split())}"[:500]


# Py4J's own words for "the JVM threw": the object id and method say nothing to a person
_PY4J_CALL = re.compile(r"^\s*(?:py4j\.protocol\.Py4JJavaError: )?An error occurred while calling [\w.$]+\.?\s*$")
_JAVA_CLASS = re.compile(r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)?:\s*")
LOG_HINT = "Spark gave no reason here: see .ratui/logs/spark.log (the newest ERROR lines)"


def _java_failure(text: str) -> str | None:
    """A JVM exception reached through Py4J ("An error occurred while calling o91.collectToPython."): the Java
    exception's own message and its root cause ("... is not a Parquet file"), or where to look when it has none.
    None for any other text."""
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    if not _PY4J_CALL.match(first):
        return None
    message = ""
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith(": "):  # the Java exception: ": org.apache.spark.SparkException: [CONDITION] text"
            message = _JAVA_CLASS.sub("", stripped[2:].strip())
            break
    causes = [_JAVA_CLASS.sub("", line.strip()[len("Caused by:"):].strip()) for line in lines
              if line.strip().startswith("Caused by:")]
    cause = next((c for c in reversed(causes) if c), "")
    if message and cause and cause not in message:
        message = f"{message} (cause: {cause})"
    message = message or cause
    if not message:
        return LOG_HINT
    return " ".join(_POSITION_TEXT.sub("", message).split())[:500]
