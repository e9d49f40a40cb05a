"""console/logs.py: the project's log files read as entries (log4j's format as ratui configures it, the console's
Python logging, the JVM's own output), filtered by level, searched, read from the end of a big file, and followed
as they grow, are truncated or replaced."""

from __future__ import annotations

import os

from ratui.console.logs import (
    LogFile, LogModel, classify, find_matches, header_parts, list_logs, match_spans, shown,
)

# log4j2's PatternLayout `%d{yyyy-MM-dd HH:mm:ss.SSS} %p %c{1}: %m%n` (engine/spark/session.py), as a real
# spark.log has it: a WARN, an ERROR with a multi-line message and a stack trace, ratui's own INFO line
SPARK_LOG = """\
2026-11-24 00:46:30.716 WARN FairSchedulableBuilder: A job was submitted with scheduler pool run-2611, which has not \
been configured.
2026-11-24 00:46:31.412 ERROR Executor: Exception in task 0.0 in stage 458.0 (TID 503)
org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT] The value 'placed' cannot be cast to "INT".
== SQL (line 2, position 8) ==
SELECT CAST(status AS INT) AS n
       ^^^^^^^^^^^^^^^^^^^

\tat org.apache.spark.sql.errors.QueryExecutionErrors$.invalidInputInCastToNumberError(QueryExecutionErrors.scala:132)
\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:593)
\t... 21 more
2026-11-24 00:46:31.434 ERROR TaskSetManager: Task 0 in stage 458.0 failed 1 times; aborting job
2026-11-24 00:47:02 INFO ratui.spark: Spark Connect sc://localhost:15002: server Spark 4.0.1
2026-11-24 00:47:05.001 DEBUG Utils: a debug line
"""


def write(path, text: str, mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8") as fh:
        fh.write(text)


def model_of(chunk) -> LogModel:
    model = LogModel()
    model.extend(chunk.lines)
    return model


def test_entries_levels_and_stack_traces(tmp_path):
    path = tmp_path / "spark.log"
    write(path, SPARK_LOG)
    chunk = LogFile(path).read()
    model = model_of(chunk)
    assert [e.level for e in model.entries] == ["WARN", "ERROR", "ERROR", "INFO", "DEBUG"]
    error = model.entries[1]
    # the message's SQL, the blank line and the stack trace belong to the entry above them
    assert len(error.lines) == 9
    assert error.lines[-1] == "    ... 21 more"  # tabs expanded: the screen draws columns, not tab stops
    assert model.level_counts() == {"ERROR": 2, "WARN": 1, "INFO": 1, "DEBUG": 1}
    assert chunk.skipped_bytes == 0 and chunk.exists and not chunk.partial_tail

    # the filter: a least level; an entry's continuation lines are filtered with it
    assert [model.entries[i].level for i in model.visible("WARN")] == ["WARN", "ERROR", "ERROR"]
    assert [model.entries[i].level for i in model.visible("ERROR")] == ["ERROR", "ERROR"]
    assert len(model.visible(None)) == 5
    assert shown("INFO", "INFO") and not shown("DEBUG", "INFO") and not shown("", "INFO") and shown("", None)

    parts = header_parts(error.lines[0])
    line = error.lines[0]
    assert line[slice(*parts.at)] == "2026-11-24 00:46:31.412"
    assert line[slice(*parts.level)] == "ERROR"
    assert line[slice(*parts.source)] == "Executor:"


def test_other_formats_in_the_log_folder():
    # the console's Python logging and the errors it showed (console.log)
    assert classify("2026-11-24 00:46:31,412 WARNING ratui.console: Spark pre-warm failed") == "WARN"
    assert classify("--- 2026-11-24T01:00:15.818262+00:00 while loading (Runs)") == "ERROR"
    assert classify("Traceback (most recent call last):") is None
    # the JVM's own output (jvm.out) and Spark's default log4j pattern on a cluster
    assert classify("[1323.705s][warning][cds] Preload Warning: Verification failed") == "WARN"
    assert classify("WARNING: Using incubator modules: jdk.incubator.vector") == "WARN"
    assert classify("25/11/24 00:46:31 ERROR Executor: boom") == "ERROR"
    assert classify("2026-11-24 00:46:31.412 [main] FATAL Foo: down") == "ERROR"
    assert classify("\tat org.apache.spark.Foo(Foo.scala:1)") is None


def test_search_is_case_insensitive_and_gives_positions(tmp_path):
    path = tmp_path / "spark.log"
    write(path, SPARK_LOG)
    model = model_of(LogFile(path).read())
    matches = find_matches(model.entries, model.visible(None), "STAGE 458")
    assert [(m.entry, m.line) for m in matches] == [(1, 0), (2, 0)]
    first = matches[0]
    assert model.entries[1].lines[0][first.start:first.end] == "stage 458"
    # the filter narrows the search to what it shows
    assert find_matches(model.entries, model.visible("ERROR"), "scheduler pool") == []
    assert len(find_matches(model.entries, model.visible(None), "scheduler pool")) == 1
    # matches inside a stack trace are found on their line
    trace = find_matches(model.entries, model.visible(None), "executor$taskrunner")
    assert [(m.entry, m.line) for m in trace] == [(1, 7)]
    assert match_spans("abcABCabc", "abc") == [(0, 3), (3, 6), (6, 9)]
    assert find_matches(model.entries, model.visible(None), "") == []


def test_a_big_file_is_read_from_its_end_and_says_what_is_left_out(tmp_path):
    path = tmp_path / "spark.log"
    entry = ("2026-11-24 00:00:{s:02d}.000 ERROR Executor: failure {n}\n"
             "java.lang.RuntimeException: boom {n}\n\tat a.b.C.d(C.java:1)\n\tat a.b.C.e(C.java:2)\n")
    write(path, "".join(entry.format(s=n % 60, n=n) for n in range(2000)))
    size = path.stat().st_size
    reader = LogFile(path, max_bytes=10_000)
    chunk = reader.read()
    model = model_of(chunk)
    assert chunk.size == size
    # whole entries only: the first one read starts an entry (the piece of the one cut in half is left out too)
    assert model.entries[0].level == "ERROR" and len(model.entries[0].lines) == 4
    assert model.entries[-1].lines[0].endswith("failure 1999")
    assert chunk.skipped_bytes > size - 10_000  # the older text not read, said on the screen
    # everything after the left-out part is shown (each entry's two `\tat` lines are 3 characters longer on screen:
    # their tab expanded)
    shown_chars = sum(len(line) + 1 for e in model.entries for line in e.lines)
    assert shown_chars == size - chunk.skipped_bytes + 2 * 3 * len(model.entries)

    # at most max_entries are kept: the oldest go, counted
    capped = LogModel(max_entries=50)
    capped.extend(chunk.lines)
    gone = capped.trim()
    assert len(capped.entries) == 50 and gone == capped.dropped == len(model.entries) - 50
    assert capped.entries[-1].lines[0].endswith("failure 1999")
    assert capped.level_counts() == {"ERROR": 50}


def test_follow_appends_lines_and_handles_a_partial_line(tmp_path):
    path = tmp_path / "spark.log"
    write(path, SPARK_LOG)
    reader = LogFile(path)
    model = model_of(reader.read())
    assert reader.poll() is None  # nothing new

    write(path, "2026-11-24 00:48:00.000 WARN Foo: first new\n2026-11-24 00:48:01.000 ERROR Bar: half", "a")
    chunk = reader.poll()
    assert not chunk.reset and chunk.partial_tail
    model.extend(chunk.lines)
    assert model.entries[-1].lines == ["2026-11-24 00:48:01.000 ERROR Bar: half"]

    write(path, " a line\n\tat x.y(Z.java:1)\n", "a")
    chunk = reader.poll()
    assert chunk.replaces_partial and not chunk.partial_tail
    model.drop_last_line()
    first_changed = model.extend(chunk.lines)
    assert model.entries[-1].lines == ["2026-11-24 00:48:01.000 ERROR Bar: half a line", "    at x.y(Z.java:1)"]
    assert first_changed == len(model.entries) - 1
    assert model.level_counts()["ERROR"] == 3 and model.level_counts()["WARN"] == 2

    # a continuation line alone extends the last entry
    write(path, "\tat x.y(Z.java:2)\n", "a")
    changed = model.extend(reader.poll().lines)
    assert changed == len(model.entries) - 1 and len(model.entries[-1].lines) == 3


def test_truncated_replaced_and_removed_files_are_read_again(tmp_path):
    path = tmp_path / "spark.log"
    write(path, SPARK_LOG)
    reader = LogFile(path)
    reader.read()

    write(path, "2026-11-24 01:00:00.000 WARN Foo: after truncation\n")  # truncated (shorter) in place
    chunk = reader.poll()
    assert chunk.reset and chunk.note == "truncated"
    assert [line for _level, line in chunk.lines] == ["2026-11-24 01:00:00.000 WARN Foo: after truncation"]

    # copytruncate rotation: emptied and written again past the old position before the next poll
    longer = "".join(f"2026-11-24 01:00:{n:02d}.000 INFO Foo: rewritten {n} with a long enough line\n"
                     for n in range(5))
    write(path, longer)
    chunk = reader.poll()
    assert chunk.reset and chunk.note == "truncated" and len(chunk.lines) == 5

    # replaced by another file (rename rotation)
    other = tmp_path / "new.log"
    write(other, "2026-11-24 02:00:00.000 ERROR Foo: a new file\n")
    os.replace(other, path)
    chunk = reader.poll()
    assert chunk.reset and chunk.note == "replaced" and chunk.lines[0][0] == "ERROR"

    path.unlink()
    chunk = reader.poll()
    assert chunk.reset and not chunk.exists and chunk.note == "removed"
    assert reader.poll() is None
    write(path, "2026-11-24 03:00:00.000 WARN Foo: back\n")
    chunk = reader.poll()
    assert chunk.reset and chunk.exists and chunk.note == "created" and len(chunk.lines) == 1


def test_missing_and_empty_files_and_the_folder_listing(tmp_path):
    logs = tmp_path / ".ratui" / "logs"
    chunk = LogFile(logs / "spark.log").read()
    assert not chunk.exists and chunk.lines == []
    # spark.log and console.log are always listed (not there yet: no size), then whatever else is in the folder
    assert [(f.name, f.size) for f in list_logs(logs)] == [("spark.log", None), ("console.log", None)]
    logs.mkdir(parents=True)
    write(logs / "spark.log", "")
    write(logs / "jvm.out", "WARNING: x\n")
    write(logs / "hs_err_pid7.log", "# A fatal error\n")
    write(logs / "log4j2.properties", "rootLogger.level = warn\n")  # the logging configuration: not a log
    assert [(f.name, f.size) for f in list_logs(logs)] == [
        ("spark.log", 0), ("console.log", None), ("jvm.out", 11), ("hs_err_pid7.log", 16)]
    empty = LogFile(logs / "spark.log").read()
    assert empty.exists and empty.lines == [] and empty.size == 0
    # a file whose lines have no level (a JVM crash report): one levelless entry, shown only without a filter
    model = model_of(LogFile(logs / "hs_err_pid7.log").read())
    assert [e.level for e in model.entries] == [""] and model.visible("INFO") == []
