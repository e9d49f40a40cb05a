"""Parquet landing files: magic bytes and footer checked first, columns and their types compared across files."""

from __future__ import annotations

from typing import Any

from ratui.engine.errors import RatuiError
from ratui.engine.landing.files import ZoneFile
from ratui.engine.landing.read_checks import INFERRED, compare_columns, file_set
from ratui.engine.landing.read_contract import Format, ZoneReading


def parquet_schema(zf: ZoneFile):
    """The file's schema from its footer, after its magic bytes: an object's through two ranged reads (its first
    four bytes, then its last 64 KB, which hold the footer of most files)."""
    import pyarrow.parquet as pq

    size = zf.size
    with zf.open_random() as fh:
        head = fh.read(4)
        fh.seek(max(0, size - 4))
        tail = fh.read(4)
        if size < 12 or head != b"PAR1" or tail != b"PAR1":
            raise RatuiError("RAT-LND-008", f"landing file '{zf.name}' is not a Parquet file (no Parquet magic "
                             "bytes)", file=zf.where)
        try:
            fh.seek(0)
            return pq.read_schema(fh)
        except RatuiError:  # the object changed under the read (RAT-S3-004), or the store failed
            raise
        except Exception as exc:  # a damaged footer
            raise RatuiError("RAT-LND-008", f"landing file '{zf.name}' is a damaged Parquet file: "
                             f"{str(exc).splitlines()[0][:200]}", file=zf.where) from None


def read(zr: ZoneReading, files: list[ZoneFile]):
    reference, ref_schema = files[0], parquet_schema(files[0])
    types: dict[str, tuple[Any, ZoneFile]] = {}
    for zf in files:
        schema = parquet_schema(zf)
        compare_columns(zr.zone, reference, ref_schema.names, zf, schema.names, zr.columns)
        for f in schema:
            seen = types.get(f.name.lower())
            if seen is None:
                types[f.name.lower()] = (f.type, zf)
            elif seen[0] != f.type:
                raise RatuiError("RAT-LND-006", f"landing file '{zf.name}' in zone '{zr.zone}' has column "
                                 f"'{f.name}' as {f.type}, but '{seen[1].name}' has it as {seen[0]}",
                                 file=zf.where,
                                 hint="Write every file of a zone with the same column types.")
    from pyspark.sql import types as st

    # Spark infers a Parquet schema with a job of its own (even for one file): the same files give the same
    # schema, remembered as for CSV and JSON
    paths = [zr.spark_path(zf) for zf in files]
    reader = zr.session.read.option("mergeSchema", zr.columns == "union")
    key = ("parquet", file_set(files), zr.columns)
    known = INFERRED.get(key)
    if known is not None:
        reader = reader.schema(st.StructType.fromJson(known))
    df = reader.parquet(*paths)
    if known is None:
        INFERRED.put(key, df.schema.jsonValue())
    return df


def columns(zf: ZoneFile) -> list[str]:
    """The columns a Parquet file holds: its footer's schema."""
    return list(parquet_schema(zf).names)


FORMAT = Format("parquet", (".parquet",), read=read, columns=columns)
