"""`partition_by`: Iceberg partition specs from config, and Spark writes that honour them.

    partition_by: [day(order_ts), country]      # config.yaml (a list, or a comma-separated string)
    -- @partition_by: day(order_ts), country     # or an annotation

Terms are `column` (same as `identity(column)`), `identity(c)`, `year(c)`, `month(c)`, `day(c)` and
`hour(c)` (the plural spellings years/months/days/hours are accepted too). year, month and day apply to
dates and timestamps, hour to timestamps only; identity to any column type ratui stores.

A table is created with the spec; every later write splits its files so that each file holds exactly one
partition value: Spark computes each transform as a hidden column with Iceberg's own arithmetic (years /
months / days / hours since 1970-01-01 UTC) and writes one directory per value (`partitionBy` on the hidden
columns, which are not stored in the files; string and binary values are named by a 64-bit hash, so long
values make no over-long paths). PyIceberg then derives each file's partition tuple from the
file's column statistics and refuses a file that holds two values, so a mismatch between the two
computations can never commit a wrong partition. A partition value Parquet keeps no statistics for (a string
over Parquet's 4 KiB statistics limit) is read back from the file itself.

A table whose spec differs from the config is not silently repartitioned: full_refresh rebuilds it with
the new spec; the other strategies stop with RAT-WRT-007 and ask for `--full-refresh`.
"""

from __future__ import annotations

from typing import Any, Iterable

from ratui.engine.project.partition_terms import (  # noqa: F401 - the terms, re-exported with their specs
    _ALIASES, TRANSFORMS, PartitionTerm, parse_partition_by, parse_term,
)

HIDDEN = "_ratui_p"


# ------------------------------------------------------------------------------------------ Iceberg specs


def _error(message: str, key: str):
    from ratui.engine.errors import RatuiError

    return RatuiError("RAT-WRT-007", f"{key}: {message}")


def build_spec(schema, terms: Iterable[PartitionTerm], key: str = "table"):
    """The PartitionSpec for `terms` over an Iceberg schema; RAT-WRT-007 when a term does not fit."""
    from pyiceberg import types as it
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import (
        DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform,
    )

    terms = list(terms)
    if not terms:
        return UNPARTITIONED_PARTITION_SPEC
    transforms = {"identity": IdentityTransform, "year": YearTransform, "month": MonthTransform,
                  "day": DayTransform, "hour": HourTransform}
    temporal = (it.DateType, it.TimestampType, it.TimestamptzType)
    fields = []
    for i, term in enumerate(terms):
        try:
            source = schema.find_field(term.column, case_sensitive=False)
        except ValueError:
            raise _error(f"partition_by column '{term.column}' is not a column of the result "
                         f"(columns: {', '.join(f.name for f in schema.fields)})", key) from None
        ftype = source.field_type
        if term.transform in ("year", "month", "day") and not isinstance(ftype, temporal):
            raise _error(f"partition_by {term}: {term.transform}() needs a date or timestamp column, "
                         f"'{source.name}' is {ftype}", key)
        if term.transform == "hour" and not isinstance(ftype, (it.TimestampType, it.TimestamptzType)):
            raise _error(f"partition_by {term}: hour() needs a timestamp column, '{source.name}' is {ftype}", key)
        name = PartitionTerm(term.transform, source.name).field_name
        fields.append(PartitionField(source_id=source.field_id, field_id=1000 + i,
                                     transform=transforms[term.transform](), name=name))
    return PartitionSpec(*fields, spec_id=0)


def spec_terms(table) -> tuple[PartitionTerm, ...]:
    """The terms of a table's current spec, in config form (for comparing against partition_by)."""
    schema = table.schema()
    out = []
    for f in table.spec().fields:
        transform = str(f.transform)
        out.append(PartitionTerm(_ALIASES.get(transform, transform), schema.find_field(f.source_id).name))
    return tuple(out)


def same_terms(a: Iterable[PartitionTerm], b: Iterable[PartitionTerm]) -> bool:
    norm = lambda terms: [(t.transform, t.column.lower()) for t in terms]  # noqa: E731
    return norm(a) == norm(b)


# ---------------------------------------------------------------------------------------------- Spark side


def hidden_columns(df, table) -> tuple[Any, list[str]]:
    """`df` with one hidden column per partition field holding the Iceberg partition value of the row."""
    from pyiceberg import types as it
    from pyspark.sql import functions as F

    schema = table.schema()
    names = []
    for i, pf in enumerate(table.spec().fields):
        source = schema.find_field(pf.source_id)
        col = F.col(f"`{source.name}`")
        transform = str(pf.transform)
        is_ts = isinstance(source.field_type, (it.TimestampType, it.TimestamptzType))
        if transform == "identity":
            if isinstance(source.field_type, (it.StringType, it.BinaryType)):
                # a directory per value would fail on long values (file names stop at 255 bytes) and escape
                # odd ones: name it by the value's 64-bit hash (a collision would put two values in one file,
                # which PyIceberg refuses to register, so it can fail a write but never mislabel a file)
                value = F.when(col.isNull(), F.lit(None)).otherwise(F.xxhash64(col))
            else:
                value = col
        else:
            # Iceberg counts from 1970-01-01 in UTC; the session time zone is UTC, so year()/month() agree
            ts = col.cast("timestamp")  # used only where the column is a timestamp
            day = F.to_date(ts) if is_ts else col
            if transform in ("year", "years"):
                value = F.year(day) - 1970
            elif transform in ("month", "months"):
                value = (F.year(day) - 1970) * 12 + F.month(day) - 1
            elif transform in ("day", "days"):
                value = F.unix_date(day)
            elif transform in ("hour", "hours"):
                micros, hour = F.unix_micros(ts), F.lit(3_600_000_000)
                # floor division in exact integer arithmetic (a double quotient can round across an hour)
                value = ((micros - F.pmod(micros, hour)) / hour).cast("int")
            else:  # a spec written by another engine with a transform ratui does not compute
                raise _error(f"partition transform {transform} is not supported by ratui", "table")
        name = f"{HIDDEN}{i}"
        df = df.withColumn(name, value)
        names.append(name)
    return df, names


def fill_missing_partition(data_file, table, path: str) -> None:
    """Set partition values Parquet statistics could not give (non-NULL values without min/max) from the file.

    PyIceberg derives a file's partition from its min/max; a column without statistics yields None, which
    would put the file in the NULL partition. Read the source column of such a file and set the true value.
    """
    schema, spec = table.schema(), table.spec()
    if not spec.fields:
        return
    for pos, pf in enumerate(spec.fields):
        if data_file.partition[pos] is not None:
            continue
        nulls = (data_file.null_value_counts or {}).get(pf.source_id)
        if nulls is not None and nulls == data_file.record_count:
            continue  # genuinely the NULL partition
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyiceberg.partitioning import partition_record_value

        source = schema.find_field(pf.source_id)
        # through the table's FileIO: the file is where Spark's executors wrote it, not necessarily on this disk
        with table.io.new_input(path).open() as stream:
            parquet = pq.ParquetFile(stream)
            arrow_name = next(
                (f.name for f in parquet.schema_arrow
                 if f.metadata and f.metadata.get(b"PARQUET:field_id") == str(source.field_id).encode()),
                source.name,
            )
            column = parquet.read(columns=[arrow_name]).column(0)
        values = pc.drop_null(column)
        if len(values) == 0:
            continue
        value = values[0].as_py()
        transform = pf.transform.transform(source.field_type)
        data_file.partition[pos] = transform(partition_record_value(pf, value, schema))
