"""A run's data diff: what its write changed in its table, and the gates that may refuse the merge because of it.

Before (`before`): the table as the run's branch forked from its target (main, or a dev/publish branch): what the
target holds unless another run merged meanwhile. After: the table on the run's branch, after the write and the
quality tests. Computed after the quality tests and before the merge (resolve), in the quality phase:

    rows before / after; rows added, removed and changed (changed: by the pipeline's unique_key, a row whose other
    columns differ; without a key rows are compared whole, as multisets, and nothing is "changed")
    per column: NULLs, distinct non-NULL values (a HyperLogLog++ estimate, 5% relative error; exact for small
    counts) and the sum of numeric columns, before and after
    schema changes (columns added, dropped, renamed, retyped: from the two schemas, by field id)
    up to ten sample keys of each kind (whole rows when there is no key), sorted

Three ways, said in `method` (a module each: data_diff_in_process.py, data_diff_spark.py,
data_diff_file_stats.py; the record they fill is data_diff_model.py's):
    in_process  no Spark job: both sides read with PyIceberg (this project's FileIO, deletes applied) and compared in
                ratui's own process, when both sides together hold at most diff.in_process_rows rows and every
                column is a plain value (no struct, list or map); distinct counts are exact. A Spark job's fixed
                cost (planning, a shuffle, a few tasks: 0.5-1.4 s on 2 cores) was most of a small table's run
    spark       one Spark job (one aggregate over a full outer join by key, or over the two sides tagged and
                grouped by every column when there is no key), when both sides hold at most diff.max_rows rows
                (ratui.yaml; the snapshot summaries' counts)
    file_stats  no Spark job: the data files' statistics in the manifests. Rows before/after are exact; added /
                removed are the rows of the data files only one side has (a rewritten file counts whole as
                removed and added, so they are upper bounds); NULL counts come from each file's null count (exact
                unless position deletes apply); distinct counts, sums, changed rows and samples are not known
                (None); min/max come from the files' bounds.

A key that is not unique on a side counts each matching pair as added, removed or changed (the keyed strategies keep
keys unique); the Spark job counts such pairs in the row, NULL and sum figures too, in process they are each side's.
The gates (config.py: max_row_change, max_rows_removed, max_null_increase) fail the run with RAT-RUN-009, the diff
as the reason; a gate naming a column the table lacks is RAT-CFG-010.
"""

from __future__ import annotations

from pyiceberg.table import Table

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.project.config import PipelineConfig, parse_limit
from ratui.engine.run.data_diff_file_stats import from_stats
from ratui.engine.run.data_diff_in_process import in_process, plain
from ratui.engine.run.data_diff_model import DataDiff
from ratui.engine.run.data_diff_spark import from_spark


def compute(session, table: str, before: Table | None, after: Table, key: tuple[str, ...],
            max_rows: int, in_process_rows: int = 0) -> DataDiff:
    """The diff of `after` against `before` (None: a new table)."""
    from ratui.engine.iceberg.read import row_count

    rows_before = row_count(before) if before is not None else 0
    rows_after = row_count(after)
    changes = schema_changes(before, after)
    diff: DataDiff | None = None
    if max(rows_before, rows_after) > max_rows:
        diff = from_stats(table, before, after, list(key), rows_before, rows_after)
    elif rows_before + rows_after <= in_process_rows and plain(before) and plain(after):
        try:
            diff = in_process(table, before, after, list(key))
        except (NotImplementedError, ValueError):  # PyIceberg cannot read it (equality deletes): Spark can
            diff = None
    if diff is None:
        diff = from_spark(session, table, before, after, list(key), rows_before + rows_after)
    diff.schema_changes = changes
    diff.new_table = before is None
    return diff


# ------------------------------------------------------------------------------------------------ schema


def schema_changes(before: Table | None, after: Table) -> list[str]:
    if before is None:
        return []
    old = {f.field_id: f for f in before.schema().fields}
    new = {f.field_id: f for f in after.schema().fields}
    out = []
    for fid, f in new.items():
        if fid not in old:
            out.append(f"added column {f.name} {f.field_type}")
        else:
            if old[fid].name != f.name:
                out.append(f"renamed column {old[fid].name} to {f.name}")
            if str(old[fid].field_type) != str(f.field_type):
                out.append(f"column {f.name}: {old[fid].field_type} -> {f.field_type}")
    out.extend(f"dropped column {f.name}" for fid, f in old.items() if fid not in new)
    return out


# ------------------------------------------------------------------------------------------------- gates


def gates(config: PipelineConfig) -> bool:
    return bool(config.max_row_change or config.max_rows_removed or config.max_null_increase)


def check_gates(diff: DataDiff, config: PipelineConfig, file: str, line_of: dict[str, int | None]) -> list[str]:
    """Each gate's verdict, recorded in diff.gate; returns the failures (empty: the merge may go on).
    RAT-CFG-010 when max_null_increase names a column the table does not have after the run."""
    checked: list[str] = []
    failed: list[str] = []
    base = diff.rows_before
    for item in config.max_null_increase:  # a misspelt column is an error whatever the table's history
        name = item.split()[0]
        col = diff.column(name)
        if col is None or col.nulls_after is None:
            raise RatuiError("RAT-CFG-010", f"max_null_increase names column '{name}', which {diff.table} does not "
                             "have", file=file, line=line_of.get("max_null_increase"),
                             hint=did_you_mean(name, [c.name for c in diff.columns if c.nulls_after is not None]))
    if diff.new_table:
        diff.gate = {"passed": ["gates not applied: a new table (the target had no such table to compare with)"],
                     "failed": []}
        return []

    def limit_check(name: str, text: str | None, count: int, what: str) -> None:
        if not text:
            return
        number, percent = parse_limit(text)
        if percent:
            if base == 0:
                checked.append(f"{name} {text}: not applied (the table had no rows before)")
                return
            share = 100.0 * count / base
            verdict = f"{name} {text}: {what} {count:,} = {share:.1f}% of {base:,} rows"
            (failed if share > number else checked).append(verdict)
        else:
            verdict = f"{name} {text}: {what} {count:,} rows"
            (failed if count > number else checked).append(verdict)

    limit_check("max_row_change", config.max_row_change, diff.added + diff.removed + (diff.changed or 0),
                "added + removed + changed" if diff.changed is not None else "added + removed")
    limit_check("max_rows_removed", config.max_rows_removed, diff.removed, "removed")
    for item in config.max_null_increase:
        name, text = item.split()
        col = diff.column(name)
        assert col is not None and col.nulls_after is not None
        if base == 0:
            checked.append(f"max_null_increase {name} {text}: not applied (the table had no rows before)")
            continue
        limit, _percent = parse_limit(text)
        share_before = 100.0 * (col.nulls_before or 0) / diff.rows_before if diff.rows_before else 0.0
        share_after = 100.0 * col.nulls_after / diff.rows_after if diff.rows_after else 0.0
        rise = share_after - share_before
        verdict = (f"max_null_increase {name} {text}: NULLs {share_before:.1f}% -> {share_after:.1f}% "
                   f"({col.nulls_before or 0:,} -> {col.nulls_after:,} rows)")
        (failed if rise > limit + 1e-9 else checked).append(verdict)
    diff.gate = {"passed": checked, "failed": failed}
    return failed
