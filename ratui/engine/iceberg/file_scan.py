"""Spark's read of some Iceberg data files without the rows their position-delete files name: Spark calls alone
(no PyIceberg), so that a session that only has the plan can read it too (read.py makes the plan; an isolated
Python pipeline's child process reads its inputs from one, isolation/child.py).

Files without deletes are read in one scan; each file with deletes is read alone, so its rows carry its number,
and the positions its delete files name are left out by an anti-join (narrow: every file's rows stay in the file's
own tasks), broadcast unless the deletes are many.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ROW_POS = "__ratui_pos"
FILE_NO = "__ratui_file"


@dataclass(frozen=True)
class FileEntry:
    path: str  # where Spark reads the data file
    recorded: str  # its path as the table's metadata and its delete files name it
    deletes: list[str] = field(default_factory=list)  # where Spark reads its position-delete files

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> FileEntry:
        return cls(str(value["path"]), str(value["recorded"]), [str(d) for d in value.get("deletes", [])])


def scan_files(session, schema, entries: list[FileEntry], *, positions: bool = False, broadcast: bool = True):
    """A DataFrame over the entries' data files with `schema` (a StructType whose fields carry Iceberg's field ids).

    positions=True adds FILE_NO (the entry's index) and ROW_POS (the row's position in its file)."""
    from pyspark.sql import functions as F

    if not entries:
        df = session.createDataFrame([], schema)
        return df.withColumn(FILE_NO, F.lit(0)).withColumn(ROW_POS, F.lit(0).cast("long")) if positions else df
    dirty = [i for i, e in enumerate(entries) if e.deletes]
    clean = [i for i, e in enumerate(entries) if not e.deletes]
    reader = session.read.schema(schema)
    frames = []
    if clean and not positions:
        frames.append(reader.parquet(*[entries[i].path for i in clean]))
    else:
        for i in clean:
            frames.append(reader.parquet(entries[i].path).selectExpr(
                "*", f"{i} AS {FILE_NO}", f"_metadata.row_index AS {ROW_POS}"))
    if dirty:
        numbers = session.createDataFrame([(entries[i].recorded, i) for i in dirty], f"__p string, {FILE_NO} int")
        gone = (session.read.schema("file_path string, pos long")
                .parquet(*[d for i in dirty for d in entries[i].deletes])
                .join(F.broadcast(numbers), F.col("file_path") == F.col("__p"))
                .select(F.col(FILE_NO), F.col("pos").alias(ROW_POS)))
        if broadcast:
            gone = F.broadcast(gone)
        for i in dirty:
            rows = reader.parquet(entries[i].path).selectExpr(
                "*", f"{i} AS {FILE_NO}", f"_metadata.row_index AS {ROW_POS}")
            rows = rows.join(gone, [FILE_NO, ROW_POS], "left_anti")
            frames.append(rows if positions else rows.drop(FILE_NO, ROW_POS))
    df = frames[0]
    for frame in frames[1:]:
        df = df.unionByName(frame)
    return df
