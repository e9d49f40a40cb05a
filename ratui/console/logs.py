"""The project's log files under `.ratui/logs/`: list them, read the newest part of one, follow it as it grows,
filter by level and search. Textual-free: the Logs screen calls these from thread workers.

What is in that folder:
- `spark.log`: log4j2 output of the Spark JVM, `2026-11-24 00:46:31.412 WARN Utils: message` (the pattern
  ratui configures in engine/spark/session.py), with ratui's own `... INFO ratui.spark: ...` lines; a stack
  trace or a multi-line SQL message continues on the lines below its entry.
- `console.log`: the console's Python logging (`2026-11-24 00:46:31,412 WARNING ratui.console: message`) and
  the errors it showed, each a `--- 2026-11-24T01:00:15+00:00 context` line followed by its traceback.
- `jvm.out` (the JVM's own stdout/stderr: `[1.2s][warning][cds] ...`), `spark-connect.log`, `web.log` (`ratui
  web`), `hs_err_pid*.log` (a JVM's crash report).

A line that does not start an entry belongs to the entry above it. A big file is read from its end (the last
`max_bytes`, at most `max_entries` entries), and the reader says how much older text it left out.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# levels, most severe first; "" is a line with no level (the start of a file that has none, a crash report)
LEVELS = ("ERROR", "WARN", "INFO", "DEBUG", "TRACE")
RANK = {"ERROR": 50, "WARN": 40, "INFO": 30, "DEBUG": 20, "TRACE": 10, "": 0}
ALIASES = {"FATAL": "ERROR", "CRITICAL": "ERROR", "SEVERE": "ERROR", "ERROR": "ERROR", "WARNING": "WARN",
           "WARN": "WARN", "INFO": "INFO", "DEBUG": "DEBUG", "TRACE": "TRACE"}

# the filter the Logs screen cycles through: the least severe level shown (None: everything, levelless lines too)
FILTERS: tuple[str | None, ...] = (None, "ERROR", "WARN", "INFO")

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_ENTRIES = 20_000
# the bytes before the read position compared on every poll: other bytes there mean the file was truncated or
# replaced (copytruncate rotation), even when it has grown past the old position again since
FINGERPRINT = 64

_STAMP = (r"(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
          r"|\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2})")  # log4j/Python ISO-like, and Spark's default yy/MM/dd
_LEVEL = r"FATAL|CRITICAL|SEVERE|ERROR|WARNING|WARN|INFO|DEBUG|TRACE"
# `STAMP [thread] LEVEL logger: message` (the thread is optional): log4j, Python logging
_HEADER = re.compile(rf"^(?P<at>{_STAMP})\s+(?:\[[^\]]*\]\s+)?(?P<level>{_LEVEL})\b\s*(?P<source>[^\s:]+:)?",
                     re.IGNORECASE)
# the JVM's unified logging: `[1323.705s][warning][cds] ...`
_JVM = re.compile(r"^(?P<at>\[[\d.]+s\])\[(?P<level>\w+)\s*\]")
# the console's error blocks: `--- 2026-11-24T01:00:15.818262+00:00 while loading ...`
_CONSOLE_ERROR = re.compile(r"^--- (?P<at>\d{4}-\d{2}-\d{2}T\S+) ")
# `WARNING: Using incubator modules` (a JVM's plain messages)
_BARE = re.compile(rf"^(?P<level>{_LEVEL}):\s", re.IGNORECASE)


def classify(line: str) -> str | None:
    """The level of the entry this line starts (one of LEVELS, or "" when it starts one without a level), or
    None when the line continues the entry above it."""
    match = _HEADER.match(line)
    if match:
        return ALIASES[match["level"].upper()]
    match = _JVM.match(line)
    if match:
        return ALIASES.get(match["level"].upper(), "INFO")
    if _CONSOLE_ERROR.match(line):
        return "ERROR"
    match = _BARE.match(line)
    if match:
        return ALIASES[match["level"].upper()]
    return None


@dataclass(frozen=True)
class HeaderParts:
    """Where the parts of an entry's first line are (character offsets), for colouring."""

    at: tuple[int, int] | None = None
    level: tuple[int, int] | None = None
    source: tuple[int, int] | None = None


def header_parts(line: str) -> HeaderParts:
    for pattern in (_HEADER, _JVM, _CONSOLE_ERROR, _BARE):
        match = pattern.match(line)
        if match:
            groups = match.groupdict()
            return HeaderParts(match.span("at") if groups.get("at") else None,
                               match.span("level") if groups.get("level") else None,
                               match.span("source") if groups.get("source") else None)
    return HeaderParts()


@dataclass
class LogEntry:
    level: str  # one of LEVELS, or ""
    lines: list[str]

    @property
    def first(self) -> str:
        return self.lines[0]


def shown(level: str, min_level: str | None) -> bool:
    """Whether an entry of `level` passes the filter `min_level` (None: everything)."""
    return min_level is None or RANK.get(level, 0) >= RANK[min_level]


def parse_lines(lines: list[str]) -> list[tuple[str | None, str]]:
    """Each line with the level of the entry it starts (None: it continues the one above)."""
    return [(classify(line), line) for line in lines]


class LogModel:
    """The entries on screen: built from parsed lines, appended to while following, capped at `max_entries` (the
    oldest go, and are counted in `dropped`)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.entries: list[LogEntry] = []
        self.counts: Counter[str] = Counter()
        self.dropped = 0  # entries read but no longer kept (over the cap)

    def clear(self) -> None:
        self.entries.clear()
        self.counts.clear()
        self.dropped = 0

    def extend(self, parsed: list[tuple[str | None, str]]) -> int:
        """Append parsed lines; returns the index of the first entry that changed (a continuation line changes
        the last entry). The oldest entries go when there are more than max_entries (see `trim`)."""
        first_changed = len(self.entries)
        for level, line in parsed:
            if level is None and self.entries:
                self.entries[-1].lines.append(line)
                first_changed = min(first_changed, len(self.entries) - 1)
            else:
                entry = LogEntry(level or "", [line])
                self.entries.append(entry)
                self.counts[entry.level] += 1
        return first_changed

    def drop_last_line(self) -> None:
        """The last line was incomplete when it was read (no line end yet): it comes again, whole."""
        if not self.entries:
            return
        last = self.entries[-1]
        if len(last.lines) > 1:
            last.lines.pop()
        else:
            self.entries.pop()
            self.counts[last.level] -= 1

    def trim(self) -> int:
        """Drop the oldest entries beyond the cap (with some slack, so following does not trim on every line);
        returns how many went."""
        over = len(self.entries) - self.max_entries
        if over <= max(0, self.max_entries // 10):
            return 0
        gone = self.entries[:over]
        del self.entries[:over]
        for entry in gone:
            self.counts[entry.level] -= 1
        self.dropped += over
        return over

    def visible(self, min_level: str | None) -> list[int]:
        """Indices of the entries the filter shows."""
        if min_level is None:
            return list(range(len(self.entries)))
        floor = RANK[min_level]
        return [i for i, e in enumerate(self.entries) if RANK.get(e.level, 0) >= floor]

    def level_counts(self) -> dict[str, int]:
        """Entries per level (levels with none left out; "" counts the lines without a level)."""
        return {level: self.counts[level] for level in (*LEVELS, "") if self.counts[level] > 0}


@dataclass(frozen=True)
class Match:
    entry: int  # index in LogModel.entries
    line: int  # line of that entry
    start: int  # character offsets in the line
    end: int


def find_matches(entries: list[LogEntry], indices: list[int], query: str) -> list[Match]:
    """Every case-insensitive occurrence of `query` in the entries at `indices`, in order."""
    needle = query.lower()
    if not needle:
        return []
    out: list[Match] = []
    size = len(needle)
    for index in indices:
        for number, line in enumerate(entries[index].lines):
            lowered = line.lower()
            at = lowered.find(needle)
            while at >= 0:
                out.append(Match(index, number, at, at + size))
                at = lowered.find(needle, at + max(1, size))
    return out


def match_spans(text: str, query: str) -> list[tuple[int, int]]:
    """Case-insensitive occurrences of `query` in one line of text."""
    needle = query.lower()
    if not needle:
        return []
    lowered = text.lower()
    spans = []
    at = lowered.find(needle)
    while at >= 0:
        spans.append((at, at + len(needle)))
        at = lowered.find(needle, at + len(needle))
    return spans


# --------------------------------------------------------------------------------------------- reading files


@dataclass
class LogChunk:
    """What one read of a log file gave."""

    path: Path
    lines: list[tuple[str | None, str]] = field(default_factory=list)  # parsed lines (see parse_lines)
    reset: bool = True  # replace what is shown (a first read, or the file was truncated, replaced or removed)
    replaces_partial: bool = False  # the last line shown was incomplete: drop it, it is in these lines, whole
    partial_tail: bool = False  # the last of these lines has no line end yet
    exists: bool = True
    size: int = 0
    skipped_bytes: int = 0  # older text at the start of the file not read (a reset chunk of a big file)
    note: str | None = None  # what happened to the file ("truncated", "replaced", "removed")
    error: str | None = None  # it could not be read (the OS's message)


class LogFile:
    """One log file, read from its end and then followed as it grows. Used from one worker at a time."""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.offset = 0  # the position after the last complete line read
        self.size = 0  # the file's size at the last read
        self.inode: tuple[int, int] | None = None
        self.fingerprint = b""  # the bytes just before `offset`
        self.partial = False  # the text after `offset` (an incomplete line) was shown
        self.existed = False

    def read(self, note: str | None = None) -> LogChunk:
        """The newest part of the file: its last `max_bytes`, from the first entry that starts in them."""
        self.offset = self.size = 0
        self.partial = False
        self.fingerprint = b""
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            self.existed = False
            self.inode = None
            return LogChunk(self.path, exists=False, note=note)
        except OSError as error:
            return LogChunk(self.path, exists=True, error=f"{type(error).__name__}: {error.strerror or error}")
        with fh:
            stat = os.fstat(fh.fileno())
            self.existed = True
            self.inode = (stat.st_dev, stat.st_ino)
            size = stat.st_size
            start = max(0, size - self.max_bytes)
            fh.seek(start)
            data = fh.read(size - start)
        size = start + len(data)
        if start > 0:  # the first line read is a piece of one: skip it
            cut = data.find(b"\n")
            data = data[cut + 1:] if cut >= 0 else b""
        data_start = size - len(data)
        lines, consumed, partial = _split_lines(data)
        parsed = parse_lines(lines)
        skipped = data_start
        if skipped:  # lines before the first entry start belong to an entry left out: leave them out too
            first = next((i for i, (level, _line) in enumerate(parsed) if level is not None), None)
            if first:
                skipped += sum(len(line.encode("utf-8", "replace")) + 1 for _level, line in parsed[:first])
                parsed = parsed[first:]
        self._remember(size, data_start + consumed, partial)
        return LogChunk(self.path, parsed, reset=True, partial_tail=partial, size=size, skipped_bytes=skipped,
                        note=note)

    def poll(self) -> LogChunk | None:
        """What the file gained since the last read (None: nothing); a reset chunk when it was truncated,
        replaced or removed since."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            if self.existed:
                self.existed = False
                return self.read(note="removed")
            return None
        except OSError:
            return None
        if not self.existed:
            return self.read(note="created")
        if (stat.st_dev, stat.st_ino) != self.inode:
            return self.read(note="replaced")
        if stat.st_size < self.offset or not self._same_fingerprint():
            return self.read(note="truncated")
        if stat.st_size == self.size:
            return None
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(stat.st_size - self.offset)
        except OSError:
            return None
        if len(data) > self.max_bytes:  # more arrived than the viewer keeps: read the tail afresh
            return self.read()
        replaces = self.partial
        lines, consumed, partial = _split_lines(data)
        self._remember(self.offset + len(data), self.offset + consumed, partial)
        return LogChunk(self.path, parse_lines(lines), reset=False, replaces_partial=replaces, partial_tail=partial,
                        size=self.size)

    # ---------------------------------------------------------------------------------------------- helpers

    def _remember(self, size: int, offset: int, partial: bool) -> None:
        self.size = size
        self.offset = offset
        self.partial = partial
        self.fingerprint = self._bytes_before(offset)

    def _bytes_before(self, offset: int) -> bytes:
        if offset <= 0:
            return b""
        try:
            with open(self.path, "rb") as fh:
                start = max(0, offset - FINGERPRINT)
                fh.seek(start)
                return fh.read(offset - start)
        except OSError:
            return b""

    def _same_fingerprint(self) -> bool:
        return not self.fingerprint or self._bytes_before(self.offset) == self.fingerprint


def _split_lines(data: bytes) -> tuple[list[str], int, bool]:
    """(lines, bytes of complete lines, whether the last line has no line end yet)."""
    if not data:
        return [], 0, False
    end = data.rfind(b"\n")
    consumed = end + 1
    partial = consumed < len(data)
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if not partial:
        lines.pop()  # the empty string after the final line end
    return [_CONTROL.sub("\ufffd", line.rstrip("\r").expandtabs(4)) for line in lines], consumed, partial


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # (tabs are expanded first: a stack trace's `\tat ...`)


# ---------------------------------------------------------------------------------------------- the folder


# shown first, in this order; anything else in the folder follows by name
KNOWN = ("spark.log", "console.log", "jvm.out", "spark-connect.log", "web.log")
NOT_LOGS = (".properties", ".xml")  # the logging configuration ratui writes beside the logs (log4j2.properties)

WHAT_IT_IS = {
    "spark.log": ("Spark's log (log4j, warnings and errors of the JVM)",
                  "Spark has not started in this project yet: spark.log appears when Spark first starts (the "
                  "first run, or the console's pre-warm)."),
    "console.log": ("the console's own log (warnings, and the errors it showed, with their tracebacks)",
                    "The console has logged nothing yet: console.log appears with its first warning or error."),
    "jvm.out": ("the Spark JVM's own output (what log4j does not catch)",
                "No JVM output yet: jvm.out appears when a Spark JVM of this project starts."),
    "spark-connect.log": ("the Spark Connect client's log (when SPARK_CONNECT_LOG_LEVEL asks for one)",
                          "No Spark Connect client log: set SPARK_CONNECT_LOG_LEVEL to get one."),
    "web.log": ("the log of `ratui web` (its server, and each browser session's errors)",
                "`ratui web` has logged nothing yet."),
}


@dataclass(frozen=True)
class LogFileInfo:
    name: str
    path: Path
    size: int | None  # None: not there (yet)


def list_logs(log_dir: Path) -> list[LogFileInfo]:
    """The log files there are: spark.log and console.log always (they may not exist yet), then anything else in
    the folder."""
    log_dir = Path(log_dir)
    sizes: dict[str, int] = {}
    try:
        for item in os.scandir(log_dir):
            try:
                if item.is_file():
                    sizes[item.name] = item.stat().st_size
            except OSError:
                continue
    except OSError:
        pass
    sizes = {n: size for n, size in sizes.items() if not n.endswith(NOT_LOGS)}
    names = ["spark.log", "console.log"]
    names += [n for n in KNOWN if n in sizes and n not in names]
    names += sorted(n for n in sizes if n not in names)
    return [LogFileInfo(n, log_dir / n, sizes.get(n)) for n in names]


def describe(name: str) -> tuple[str, str]:
    """(what the file is, what to say while it is missing or empty)."""
    if name in WHAT_IT_IS:
        return WHAT_IT_IS[name]
    if name.startswith("hs_err_pid"):
        return ("a crash report of a Spark JVM", "This crash report is empty.")
    return ("a file in the project's log folder", f"{name} is empty.")


# ------------------------------------------------------------------------- what the Logs screen's workers call


def read_log(log_dir: Path, name: str) -> tuple[list[LogFileInfo], LogFile, LogChunk, LogModel]:
    """(In a worker) the files there are, and the newest part of `name` parsed into entries."""
    files = list_logs(log_dir)
    logfile = LogFile(Path(log_dir) / name)
    chunk = logfile.read()
    model = LogModel()
    model.extend(chunk.lines)
    model.trim()
    return files, logfile, chunk, model


def poll_log(logfile: LogFile, log_dir: Path) -> tuple[LogFile, LogChunk | None, list[LogFileInfo]]:
    """(In a worker) what the followed file gained since the last read."""
    return logfile, logfile.poll(), list_logs(log_dir)
