"""Every user-facing failure: a stable code, a one-line message, the file at fault and a hint.

Codes are stable: scripts, the JSON output and run records depend on them. Add new codes, never
renumber. The families:

    RAT-PRJ-*   project tree and naming (discovery)
    RAT-CFG-*   pipeline configuration (annotations, config.yaml, ratui.yaml)
    RAT-TPL-*   templating (Jinja)
    RAT-DAG-*   dependency graph and node selection
    RAT-LND-*   landing zones
    RAT-SQL-*   executing a pipeline or a quality test on Spark
    RAT-WRT-*   writing a table (merge strategies, schemas)
    RAT-CAT-*   the branch catalog
    RAT-RUN-*   the run itself (cancellation, internal failures)
    RAT-RPR-*   the reaper (cleanup tasks)
    RAT-PTH-*   paths: nothing outside the project root unless ratui.yaml allows it
    RAT-PY-*    Python pipelines
    RAT-CLI-*   command-line usage
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable


# code -> (title, default hint). The title is what the code means; the message says what happened.
CODES: dict[str, tuple[str, str]] = {
    # project
    "RAT-PRJ-001": ("invalid name", "Names start with a lowercase letter and use only a-z, 0-9, '_' and '-' (at most 128 characters)."),
    "RAT-PRJ-002": ("invalid layer", "A layer folder is exactly one of: bronze, silver, gold."),
    "RAT-PRJ-003": ("pipeline has both pipeline.sql and pipeline.py", "Keep exactly one of pipeline.sql or pipeline.py in the folder."),
    "RAT-PRJ-004": ("pipeline has no pipeline file", "Add a pipeline.sql (or pipeline.py) to the folder, or remove the folder."),
    "RAT-PRJ-005": ("project not found", "Point --project at a folder holding ratui.yaml, or create one with `ratui init DIR`."),
    "RAT-PRJ-006": ("unreadable file", "Check that the file is UTF-8 text and readable."),
    "RAT-PRJ-008": ("state database unreadable", "ratui keeps its state in .ratui/ratui.db. Move the file aside to "
                    "start with empty state (the tables' files under {namespace}/warehouse/ stay), or restore it from "
                    "a backup."),
    "RAT-PRJ-007": ("empty pipeline", "The pipeline file holds no statement (only blanks or comments): write the "
                    "SELECT that builds the table, or remove the folder."),
    # configuration
    "RAT-CFG-001": ("unknown merge strategy", "Use one of: full_refresh, append_only, incremental, delete_insert, scd2, snapshot."),
    "RAT-CFG-002": ("unknown configuration key", "Check the spelling of the annotation or config.yaml key."),
    "RAT-CFG-003": ("missing unique_key", "This strategy upserts on a key: add `-- @unique_key: col` (several columns comma-separated)."),
    "RAT-CFG-004": ("missing partition_column", "The snapshot strategy replaces partitions: add `-- @partition_column: col`."),
    "RAT-CFG-005": ("invalid configuration value", "Check the value's type: booleans are true/false, lists are comma-separated."),
    "RAT-CFG-006": ("invalid config.yaml", "config.yaml must be a YAML mapping of key: value."),
    "RAT-CFG-007": ("invalid ratui.yaml", "ratui.yaml must be a YAML mapping; see README for the settings."),
    "RAT-CFG-008": ("strategy not yet supported", "Use one of: full_refresh, append_only, incremental, delete_insert, scd2, snapshot."),
    "RAT-CFG-009": ("annotation after the SQL began", "Annotations go at the top of the file, before the first statement."),
    # templating
    "RAT-TPL-001": ("template syntax error", "Fix the Jinja syntax at the line shown."),
    "RAT-TPL-002": ("undefined template name", "Available: ref, landing_zone, this, run_started_at, watermark_value, is_incremental, is_scd2."),
    "RAT-TPL-003": ("invalid ref()", "Write ref('layer.name') or ref('namespace.layer.name') with a literal string."),
    "RAT-TPL-004": ("template error", "Fix the template expression at the line shown."),
    "RAT-TPL-005": ("unknown template filter or test", "Use one of Jinja's built-in filters and tests; ratui adds none."),
    # graph
    "RAT-DAG-001": ("dependency cycle", "Break the cycle: a pipeline cannot depend on itself through its refs."),
    "RAT-DAG-002": ("reference to an unknown table", "Create the referenced pipeline, or fix the name in ref()."),
    "RAT-DAG-003": ("selector matches nothing", "Use name, layer.name, namespace.layer.name, +x, x+, layer:silver or tag:daily."),
    "RAT-DAG-004": ("invalid selector", "Use name, layer.name, namespace.layer.name, +x, x+, layer:silver or tag:daily."),
    "RAT-DAG-005": ("ambiguous selector", "Several pipelines share this name: qualify it as layer.name or namespace.layer.name."),
    "RAT-DAG-006": ("table named without ref()", "Read other pipelines' tables through {{ ref('layer.name') }} and "
                    "the pipeline's own table through {{ this }}: ratui resolves them on the run's branch."),
    # landing
    "RAT-LND-001": ("unknown landing zone", "Create the folder {namespace}/landing/{zone}/ or fix the zone name."),
    "RAT-LND-002": ("landing zone has no active files", "Drop files into the zone folder (files in _processed/ and _samples/ are never read)."),
    "RAT-LND-003": ("landing zone mixes file formats", "Keep one format per zone (csv, parquet, json/jsonl)."),
    "RAT-LND-004": ("unsupported landing file format", "Use .csv, .parquet, .json or .jsonl files."),
    "RAT-LND-005": ("landing files for a rebuild are gone", "A rebuild reads every file the ledger has loaded. "
                    "Put the files back where the ledger says, or drop them from the ledger on purpose with "
                    "`ratui landing forget ZONE FILE`."),
    "RAT-LND-006": ("landing file columns do not fit the zone", "Every file of a zone must have the same columns "
                    "(in any order). Fix the file, or set `landing: {columns: union}` in ratui.yaml to read missing "
                    "columns as NULL."),
    "RAT-LND-007": ("malformed rows in a landing file", "Fix the rows shown, or set `landing: {bad_rows: skip}` in "
                    "ratui.yaml to leave them out (their count and first lines are kept with the run)."),
    "RAT-LND-008": ("not a readable landing file", "The file is not valid for its extension (binary data, "
                    "not UTF-8, or a damaged file). Replace it, or move it out of the zone."),
    "RAT-LND-009": ("empty landing file", "The file holds no data; it loads as zero rows. Remove it if it arrived "
                    "by mistake."),
    # execution
    "RAT-SQL-001": ("pipeline SQL failed on Spark", "Fix the SQL; the Spark message says what failed."),
    "RAT-SQL-002": ("quality test SQL failed on Spark", "Fix the test's SQL; a test returns the violating rows."),
    # RAT-SQL-003 was "Python pipeline failed"; Python pipelines have their own family (RAT-PY-*) now.
    "RAT-SQL-003": ("Python pipeline failed", "Fix the Python pipeline; it must define run(ctx) returning a Spark DataFrame."),
    # writing
    "RAT-WRT-001": ("unique key column missing from the result", "The result must contain every unique_key column."),
    "RAT-WRT-002": ("watermark column missing from the result", "The result must contain the watermark_column."),
    "RAT-WRT-003": ("incompatible schema change", "Only added columns and widening (int->long, float->double, decimal precision up) evolve a table; use --full-refresh to rebuild it."),
    "RAT-WRT-004": ("unsupported column type", "Cast the column to a supported type (numbers, strings, booleans, dates, timestamps, decimals, binary)."),
    "RAT-WRT-005": ("duplicate column names in the result", "Give every result column a distinct name (aliases are case-insensitive)."),
    "RAT-WRT-006": ("write failed", "See the run log; main is unchanged."),
    "RAT-WRT-007": ("invalid partitioning", "partition_by terms are column or transform(column) with identity, year, month, day (dates, timestamps) or hour (timestamps); a table partitioned differently is rebuilt with --full-refresh."),
    "RAT-WRT-008": ("partition column missing from the result", "The snapshot strategy replaces the partitions present in the result: the result must contain the partition_column."),
    "RAT-WRT-010": ("unsupported column name", "Rename the column (AS name): a column name may not be empty or hold a "
                    "backtick or a control character."),
    "RAT-WRT-009": ("SCD2 validity column clash", "The scd2 strategy adds the scd_valid_from / scd_valid_to columns itself: drop them from the result or name others with @scd_valid_from / @scd_valid_to."),
    # catalog
    "RAT-CAT-001": ("branch already exists", "Pick another name or delete the branch first."),
    "RAT-CAT-002": ("branch not found", "List branches with `ratui branches`."),
    "RAT-CAT-003": ("merge conflict", "Another run changed the same table on main since this branch forked; run again."),
    "RAT-CAT-004": ("cannot delete main", "main is the production ref; it cannot be deleted."),
    "RAT-CAT-005": ("table not found", "Run the pipeline that produces the table first, or check the name."),
    "RAT-CAT-006": ("invalid branch name", "Branch names start with a letter or digit and use only letters, digits, '.', '_' and '-' (at most 128 characters)."),
    "RAT-CAT-007": ("invalid merge", "Merge a branch into the ref it was created from; main itself cannot be merged."),
    "RAT-CAT-008": ("table has delete files", "The table was written by an engine that records deleted rows in "
                    "delete files, which ratui does not read yet: rebuild it with --full-refresh or compact it with "
                    "that engine first."),
    # run
    "RAT-RUN-001": ("run cancelled", "The run was cancelled; main is unchanged."),
    "RAT-RUN-002": ("internal error", "This is a bug in ratui; the run log holds the traceback. main is unchanged."),
    "RAT-RUN-003": ("quality gate failed", "An error-severity quality test found violations; main is unchanged. See the quality results."),
    "RAT-RUN-004": ("run not found", "List runs with `ratui runs`."),
    "RAT-RUN-005": ("upstream failed", "Fix the upstream pipeline's failure first."),
    "RAT-RUN-006": ("process died", "The process running this run ended without finishing it (killed or crashed); "
                    "main is unchanged. Run the pipeline again."),
    "RAT-RUN-007": ("run timed out", "The run stayed running longer than reaper.stuck_run_timeout_minutes in "
                    "ratui.yaml; main is unchanged. Look for a hung job in the run log, then run it again."),
    "RAT-RUN-008": ("compile errors in the project", "`ratui check` lists every problem; fix them, or name the "
                    "pipelines to run (broken ones outside the selection are then only warnings)."),
    # reaper
    "RAT-RPR-001": ("reaper task failed", "The other reaper tasks still ran; the next pass retries this one."),
    "RAT-RPR-002": ("orphan-file sweep skipped: unreadable table metadata", "Nothing was deleted: a live ref "
                    "points at metadata ratui cannot read, so what it reaches is unknown. Fix or drop that table."),
    # paths
    "RAT-PTH-001": ("path outside the project", "ratui reads and writes only inside the project folder. Copy the "
                    "files into the project, or list the folder under `paths: {allow_outside: [...]}` in ratui.yaml."),
    "RAT-PTH-002": ("table files outside the project", "A table's metadata and data files must lie inside the "
                    "project (under {namespace}/warehouse/). Rebuild the table with --full-refresh, or list the "
                    "folder under `paths: {allow_outside: [...]}` in ratui.yaml."),
    # python pipelines
    "RAT-PY-001": ("Python pipeline raised an exception", "Fix the Python code at the line shown; run(ctx) must "
                   "return a Spark DataFrame."),
    "RAT-PY-002": ("Python syntax error", "Fix the Python syntax at the line shown."),
    "RAT-PY-003": ("invalid Python pipeline", "pipeline.py must define run(ctx) and return a Spark DataFrame from it."),
    "RAT-PY-004": ("Python pipeline's DataFrame failed on Spark", "The DataFrame run(ctx) returned failed when Spark "
                   "computed it; the Spark message says what failed."),
    # command line
    "RAT-CLI-001": ("invalid command line", "`ratui --help` lists the commands; `ratui COMMAND --help` their options."),
}


@dataclass
class RatuiError(Exception):
    """A coded, user-facing error. `file` and `line` point at what is at fault, when known."""

    code: str
    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unregistered error code {self.code}")
        if self.hint is None:
            self.hint = CODES[self.code][1]
        super().__init__(self.message)

    @property
    def title(self) -> str:
        return CODES[self.code][0]

    @property
    def location(self) -> str | None:
        if not self.file:
            return None
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{self.code} {where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "hint": self.hint,
        }

    def render(self) -> str:
        """Two lines for a terminal: what and where, then the hint."""
        return f"error[{self.code}] {self.location + ': ' if self.location else ''}{self.message}\n  hint: {self.hint}"


class ProjectErrors(Exception):
    """Several coded errors found at once (compile reports every problem, not only the first)."""

    def __init__(self, errors: Iterable[RatuiError]):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


# The families, classified once. A definition error means the pipeline's own files are at fault (not its data):
# a run failing with one does not count as an attempt against its landing files. A usage error is reported by a
# command before it runs anything (exit code 2).
DEFINITION_FAMILIES = ("RAT-TPL", "RAT-CFG", "RAT-PRJ", "RAT-DAG")
USAGE_FAMILIES = ("RAT-PRJ", "RAT-CFG", "RAT-TPL", "RAT-DAG", "RAT-LND", "RAT-CLI", "RAT-PTH", "RAT-PY")
USAGE_CODES = ("RAT-RUN-004",)
# a failure of what the pipeline produced or read: its file is named when the error has no other place
PIPELINE_FAULT_FAMILIES = ("RAT-WRT", "RAT-SQL", "RAT-PY", "RAT-CFG", "RAT-TPL")


def is_definition_error(code: str) -> bool:
    return code.startswith(DEFINITION_FAMILIES)


def is_usage_error(code: str) -> bool:
    return code.startswith(USAGE_FAMILIES) or code in USAGE_CODES


def suggest(word: str, choices: Iterable[str]) -> str | None:
    """The nearest valid word, for 'did you mean' hints."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return match[0] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    near = suggest(word, choices)
    valid = ", ".join(sorted(choices))
    return f"Did you mean '{near}'? Valid: {valid}." if near else f"Valid: {valid}."
