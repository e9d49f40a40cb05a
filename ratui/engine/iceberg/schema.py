"""Iceberg and Spark schemas: types mapped both ways, with Iceberg field ids on the Spark side.

Spark reads and writes Parquet with the Iceberg field ids in each column's metadata (`parquet.field.id`), so added
columns, renames and widened types read right, and the files PyIceberg registers carry the ids it expects.
"""

from __future__ import annotations

from pyiceberg import types as it
from pyiceberg.schema import Schema

from ratui.engine.errors import RatuiError

FIELD_ID = "parquet.field.id"


NAME_MAPPING = "schema.name-mapping.default"


def spark_to_iceberg_type(dtype, column: str):
    from pyspark.sql import types as st

    if isinstance(dtype, st.DecimalType):
        return it.DecimalType(dtype.precision, dtype.scale)
    for spark_types, iceberg_type in (
            (st.BooleanType, it.BooleanType), ((st.ByteType, st.ShortType, st.IntegerType), it.IntegerType),
            (st.LongType, it.LongType), (st.FloatType, it.FloatType), (st.DoubleType, it.DoubleType),
            ((st.StringType, st.CharType, st.VarcharType), it.StringType), (st.BinaryType, it.BinaryType),
            (st.DateType, it.DateType), (st.TimestampNTZType, it.TimestampType),
            (st.TimestampType, it.TimestamptzType)):
        if isinstance(dtype, spark_types):
            return iceberg_type()
    hint = "Cast it, e.g. CAST(NULL AS STRING)." if isinstance(dtype, st.NullType) else None
    raise RatuiError("RAT-WRT-004", f"column '{column}' has type {dtype.simpleString()}, which ratui cannot store "
                     "yet", hint=hint)


def iceberg_to_spark_type(itype):
    from pyspark.sql import types as st

    mapping = {
        it.BooleanType: st.BooleanType,
        it.IntegerType: st.IntegerType,
        it.LongType: st.LongType,
        it.FloatType: st.FloatType,
        it.DoubleType: st.DoubleType,
        it.StringType: st.StringType,
        it.BinaryType: st.BinaryType,
        it.DateType: st.DateType,
        it.TimestampType: st.TimestampNTZType,
        it.TimestamptzType: st.TimestampType,
    }
    if isinstance(itype, it.DecimalType):
        return st.DecimalType(itype.precision, itype.scale)
    for ice, spark_type in mapping.items():
        if isinstance(itype, ice):
            return spark_type()
    raise RatuiError("RAT-WRT-004", f"Iceberg type {itype} is not readable by ratui")


def spark_schema_of(schema: Schema):
    """The Spark schema of an Iceberg schema, with field ids so Spark matches Parquet columns by id."""
    from pyspark.sql import types as st

    return st.StructType([
        st.StructField(f.name, iceberg_to_spark_type(f.field_type), True, {FIELD_ID: f.field_id})
        for f in schema.fields
    ])


def iceberg_schema_of(spark_schema) -> Schema:
    """A new table's schema: every column optional (Spark's nullability is not a promise), ids from 1."""
    check_columns(spark_schema)
    fields = [
        it.NestedField(i, f.name, spark_to_iceberg_type(f.dataType, f.name), required=False)
        for i, f in enumerate(spark_schema.fields, start=1)
    ]
    return Schema(*fields)


def column_name_problem(name: str) -> str | None:
    if not name.strip():
        return "is empty"
    if "`" in name:
        return "holds a backtick"
    if any(ord(c) < 32 for c in name):
        return "holds a control character"
    return None


def check_columns(spark_schema) -> None:
    seen: dict[str, str] = {}
    for f in spark_schema.fields:
        problem = column_name_problem(f.name)
        if problem:
            raise RatuiError("RAT-WRT-010", f"column name {f.name!r} {problem}")
        low = f.name.lower()
        if low in seen:
            raise RatuiError("RAT-WRT-005", f"the result has two columns named '{seen[low]}' and '{f.name}'")
        seen[low] = f.name
        spark_to_iceberg_type(f.dataType, f.name)


