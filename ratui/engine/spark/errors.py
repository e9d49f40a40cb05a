"""Reading Spark's errors: the line of the SQL text they point at, a first line fit for a person, whether Spark
stopped the work because it was asked to or because it went away, and why a JVM that did not start stopped (from
its own output), or which ratui.yaml setting Spark refused."""

from __future__ import annotations

import re
from pathlib import Path

from ratui.engine.errors import RatuiError
from ratui.engine.project.settings import SETTINGS_FILE, Settings

_POSITION = re.compile(r"line (\d+),? pos(?:ition)? (\d+)")
_POSITION_TEXT = re.compile(r"\s*\(line \d+, pos \d+\)|;? line \d+ pos \d+;?")
# a Spark Connect error the client has no class for names the server's: "(org.apache.spark.SparkException) [...]"
_SERVER_CLASS = re.compile(r"^\((?:[a-z_][\w]*\.)+[A-Z]\w*\)\s*")


def error_position(text: str) -> tuple[int | None, int | None]:
    """(line, column) of the first position a Spark error's text names (1-based line, 0-based column): "(line 2,
    pos 7)" from the parser, "line 2 pos 7" from the analyzer; Nones when it names none."""
    match = _POSITION.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def error_line(exc: BaseException) -> int | None:
    """The line of the SQL text a Spark error points at (parse, analysis and execution errors all say it)."""
    return error_position(str(getattr(exc, "desc", None) or exc))[0]


def error_condition(exc: BaseException) -> str | None:
    """The error condition PySpark 4 gives an error ("SPARK_JOB_CANCELLED", "TABLE_OR_VIEW_NOT_FOUND"), or None
    (a Py4J error, or another library's)."""
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if not callable(getter):
        return None
    try:
        condition = getter()
    except Exception:  # noqa: BLE001 - an error object that cannot say is one without a condition
        return None
    return str(condition) if condition else None


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


# What an interrupted job says: a cancelled job group or tag (a JVM of our own), an interrupted operation (Connect)
CANCELLATION_TEXTS = ("SPARK_JOB_CANCELLED", "cancelled job group", "was cancelled", "OPERATION_CANCELED",
                      "cancelled because it was part of cancelled job tags", "cancelled job tag")


CANCELLATION_CONDITIONS = ("SPARK_JOB_CANCELLED", "OPERATION_CANCELED", "OPERATION_CANCELLED")


def is_cancellation(exc: BaseException) -> bool:
    """Spark stopped the work because it was asked to: said by PySpark 4's error condition where there is one, by
    the message's words for a Py4J error (which has none)."""
    condition = error_condition(exc)
    if condition is not None and condition.split(".", 1)[0] in CANCELLATION_CONDITIONS:
        return True
    text = str(exc)
    return any(marker in text for marker in CANCELLATION_TEXTS)


# The code of "Spark cannot be reached"
UNREACHABLE_CODE = "RAT-SPK-001"

# What a Spark that went away says: a Connect server that stopped answering (error_message words it), a JVM of our
# own that died or was stopped
UNREACHABLE_TEXTS = ("Spark Connect server unreachable", "SparkContext was shut down",
                     "Cannot call methods on a stopped SparkContext", "Answer from Java side is empty")


def is_unreachable(exc: BaseException) -> bool:
    """Spark itself went away during the work (not the pipeline's fault, nor its data's)."""
    if type(exc).__name__ == "Py4JNetworkError":
        return True
    text = f"{error_message(exc)}\n{exc}"
    return any(marker in text for marker in UNREACHABLE_TEXTS)


_RPC_TEXT = re.compile(r"status = StatusCode\.(\w+).*?details = \"(.*?)\"", re.S)


def _rpc_parts(exc: BaseException) -> tuple[str, str] | None:
    """(status, details) of a gRPC failure of the Spark Connect client, from the call object or its text."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details) and type(exc).__module__.split(".")[0] == "grpc":
        try:
            return getattr(code(), "name", str(code())), str(details() or "")
        except Exception:
            pass
    match = _RPC_TEXT.search(str(exc))
    if match is None or not str(exc).lstrip().startswith("<_"):
        return None
    return match.group(1), match.group(2)


def _rpc_failure(exc: BaseException) -> str | None:
    """A gRPC failure of the Spark Connect client (the server gone, a call that gave up), in words: its status and
    details, not the call object's text ("<_MultiThreadedRendezvous of RPC that terminated with: ...")."""
    parts = _rpc_parts(exc)
    if parts is None:
        return None
    status, text = parts
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


# ------------------------------------------------------------------------------------- a JVM that did not start

# what a JVM that refuses to start says besides its reason
_JVM_BOILERPLATE = ("Error: Could not create the Java Virtual Machine", "Error: A fatal exception has occurred",
                    "WARNING: Using incubator modules")

JVM_NOT_STARTED = "RAT-SPK-002"

_JVM_NOTE = re.compile(r"^\[[\d.]+s\]\[(warning|info)\]|^WARNING:|^OpenJDK .*[Ww]arning")  # unified logging, notes

def jvm_not_started(settings: Settings, exc: BaseException, jvm_out: Path, offset: int) -> BaseException:
    """A JVM that exited before Spark was up, as RAT-SPK-002 with the JVM's own reason (from jvm.out) and, when
    that reason names a Java option of ratui.yaml, its line (anything else as it was)."""
    if "JAVA_GATEWAY_EXITED" not in str(exc):
        return exc
    try:
        with open(jvm_out, "rb") as out:
            out.seek(offset)
            said = out.read(64 * 1024).decode("utf-8", "replace").splitlines()
    except OSError:
        said = []
    reasons = [line.strip() for line in said if line.strip() and not line.strip().startswith(_JVM_BOILERPLATE)
               and not _JVM_NOTE.match(line.strip()) and not line.strip().startswith("at ")]
    # a warning the JVM prints on its way (a class archive it could not map) is not why it stopped: an exception or
    # an error is, when there is one
    failures = [r for r in reasons if r.startswith(("Exception in thread", "Error", "Caused by")) or "Exception:" in r
                or "Error:" in r]
    reason = (failures or reasons or ["it printed nothing"])[0]
    reason = re.sub(r'^Exception in thread "[^"]*" ', "", reason)
    key = next((key for key in ("spark.driver.extraJavaOptions", "spark.driver.memory")
                if any(_option_word(word) in reason for word in settings.spark_config.get(key, "").split()
                       if _option_word(word))), None)
    line = _settings_line(settings, key) if key else None
    return RatuiError(JVM_NOT_STARTED, f"Spark's JVM did not start: {reason[:300]}",
                      file=str(settings.root / SETTINGS_FILE) if line else None, line=line,
                      hint=(f"Fix {key} under spark: config: in {SETTINGS_FILE}. " if line else "")
                      + f"The JVM's whole output is in {jvm_out}; nothing was written and main is unchanged.")

def _option_word(word: str) -> str:
    """The name in a Java option (-XX:+Name, -XX:Name=1, -Dname=value) or the value itself (2g)."""
    return word.lstrip("-").removeprefix("XX:").lstrip("+-").split("=", 1)[0]

def _settings_line(settings: Settings, key: str) -> int | None:
    """The line of ratui.yaml that sets a Spark setting (written as `key: value` under spark: config:)."""
    try:
        for number, content in enumerate((settings.root / SETTINGS_FILE).read_text(encoding="utf-8").splitlines(),
                                         start=1):
            if content.strip().startswith(f"{key}:"):
                return number
    except OSError:
        pass
    return None

def refused_setting(settings: Settings, exc: BaseException) -> BaseException:
    """A Spark setting of ratui.yaml Spark refuses, as RAT-CFG-007 at its line (anything else as it was)."""
    import re

    text = str(exc)
    found = re.search(r'config "([^"]+)"', text)
    if "INVALID_CONF_VALUE" not in text or found is None:
        return exc
    key = found.group(1)
    message = next((line.strip() for line in text.splitlines() if "INVALID_CONF_VALUE" in line), text)
    message = message[message.index("[INVALID_CONF_VALUE"):] if "[INVALID_CONF_VALUE" in message else message
    path = settings.root / SETTINGS_FILE
    line = _settings_line(settings, key)
    return RatuiError("RAT-CFG-007", f"Spark refuses the setting {key} in {SETTINGS_FILE}: {message}", file=str(path),
                      line=line, hint=f"Fix or remove {key} under spark: config: in {SETTINGS_FILE} (Spark's message "
                      "says what it accepts). A console started before the fix needs a restart: Spark reads its "
                      "settings when it starts.")


# Spark (S3A) failing to reach an object store, by the words its exceptions carry. Each gives the object store's own
# code (storage/s3.py classify), said from Spark's side: it is Spark (a cluster's executors, a Connect server) that
# could not reach the store, which this machine may well reach.
_NO_CONNECTOR = ("S3AFileSystem not found", "No FileSystem for scheme \"s3", "No FileSystem for scheme 's3",
                 "UNSUPPORTED_FILE_SYSTEM", "hadoop/fs/s3a", "software/amazon/awssdk")
_S3A_FAILURE = ("org.apache.hadoop.fs.s3a.", "software.amazon.awssdk.", "AWSClientIOException",
                "AWSBadRequestException", "UnknownStoreException", "s3a://", "RemoteFileChangedException")
# a class the JVM cannot find, as Py4J ("java.lang.NoClassDefFoundError: a/b/C"), Spark Connect ("(java.lang.
# NoClassDefFoundError) a/b/C") and a JVM stack ("Caused by: java.lang.ClassNotFoundException: a.b.C") say it
_MISSING_CLASS = re.compile(r"(?:NoClassDefFoundError|ClassNotFoundException)\)?:?\s+(?:Could not initialize class\s+)?"
                            r"(?:Class\s+)?((?:[A-Za-z_$][\w$]*[./])+[A-Za-z_$][\w$]*)")
MISSING_CLASS_CODE = "RAT-SPK-004"


def full_text(exc: BaseException) -> str:
    """Everything an error says: its text, Py4J's Java text, and a Spark Connect error's server-side stack (where
    the causes are: a class missing on the server is said only there)."""
    parts = [str(exc), str(getattr(exc, "desc", None) or "")]
    getter = getattr(exc, "getStackTrace", None)
    if callable(getter):
        try:
            parts.append(str(getter() or ""))
        except Exception:  # noqa: BLE001 - an error that cannot say more says what it said
            pass
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        parts.append(str(cause))
    return "\n".join(p for p in parts if p)


# A Connect server whose JVM cannot load a class fails the call with gRPC's UNKNOWN and the error's own message: for
# a NoClassDefFoundError, the class's internal name alone ("software/amazon/s3/analyticsaccelerator/request/...")
_INTERNAL_NAME = re.compile(r"(?:[A-Za-z_$][\w$]*/)+[A-Za-z_$][\w$]*")


def missing_class(exc: BaseException) -> str | None:
    """The class (dotted name) a JVM of Spark could not find or load, when that is what went wrong: said by the
    JVM's exception (Py4J, a Connect error's server stack), or by a Connect call's bare status (UNKNOWN, the class's
    internal name)."""
    match = _MISSING_CLASS.search(full_text(exc))
    if match:
        return match.group(1).replace("/", ".")
    rpc = _rpc_parts(exc)
    if rpc is not None and rpc[0] == "UNKNOWN" and _INTERNAL_NAME.fullmatch(rpc[1].strip()):
        return rpc[1].strip().replace("/", ".")
    return None


def storage_failure(exc: BaseException) -> RatuiError | None:
    """A Spark failure caused by object storage, as RAT-S3-00x (RAT-S3-005: Spark has no S3 connector, or one that
    lacks a jar), or None."""
    text = full_text(exc)
    lacking = missing_class(exc)
    from ratui.engine.spark import s3a

    jar = s3a.jar_of(lacking) if lacking else None
    if jar is not None:
        return RatuiError("RAT-S3-005", f"Spark's S3 connector lacks the class {lacking}: {jar.file_name} "
                          f"({jar.coordinates}) is not on the classpath of Spark (the Spark Connect server's or the "
                          "cluster's, when Spark is not ratui's own)", hint=s3a.hint())
    if any(marker in text for marker in _NO_CONNECTOR):
        return RatuiError("RAT-S3-005", "Spark has no S3 connector (Hadoop's S3A) to reach s3:// "
                          f"({error_message(exc)[:200]})", hint=s3a.hint())
    if not any(marker in text for marker in _S3A_FAILURE):
        return None
    from ratui.engine.storage.s3 import classify

    match = re.search(r"s3a?://([A-Za-z0-9.\-]+)(/[^\s:;,'\")]*)?", text)
    bucket = match.group(1) if match else "?"
    where = f"s3://{bucket}{match.group(2) or ''}" if match else "s3://"
    error = classify(RuntimeError(_java_cause(text)), "read or write it from Spark", where, bucket,
                     "the object store")
    return RatuiError(error.code, f"Spark: {error.message}", file=error.file,
                      hint=(error.hint or "") + " Spark reaches the store itself (a cluster's executors, a Spark "
                      "Connect server): its network and the endpoint it is given must work from there.")


def at_class_setting(error: RatuiError, settings: Settings) -> RatuiError:
    """A missing class (RAT-SPK-004) that a Spark setting of ratui.yaml names (a catalog plugin, a serializer): the
    error points at that setting's line."""
    lacking = error.details.get("class") if error.code == MISSING_CLASS_CODE else None
    if not lacking or error.file:
        return error
    key = next((k for k, v in settings.spark_config.items() if lacking in str(v)), None)
    line = _settings_line(settings, key) if key else None
    if line is not None:
        error.file, error.line = str(settings.root / SETTINGS_FILE), line
        error.hint = f"{key} in {SETTINGS_FILE} names {lacking}, which no jar on Spark's classpath carries. " \
                     + (error.hint or "")
    return error


def spark_side_failure(exc: BaseException) -> RatuiError | None:
    """What went wrong on Spark's side, not in the query nor in its data, as its coded error: Spark gone
    (RAT-SPK-001), the object store from Spark's side or its connector (RAT-S3-00x), a class missing from Spark's
    classpath (RAT-SPK-004). None for anything else (the pipeline's or the test's own failure, or a bug)."""
    if is_unreachable(exc):
        return RatuiError(UNREACHABLE_CODE, error_message(exc))
    stored = storage_failure(exc)
    if stored is not None:
        return stored
    lacking = missing_class(exc)
    if lacking is not None:
        return RatuiError(MISSING_CLASS_CODE, f"Spark cannot load the class {lacking}: a jar is missing from its "
                          f"classpath ({error_message(exc)[:200]})", details={"class": lacking})
    return None


def _java_cause(text: str) -> str:
    """The innermost 'Caused by:' of a JVM stack (the store's own answer), else the first line."""
    causes = [line.strip()[len("Caused by:"):].strip() for line in text.splitlines()
              if line.strip().startswith("Caused by:")]
    return (causes[-1] if causes else text.strip().splitlines()[0] if text.strip() else "")[:400]
