"""Rows matched by key: NULL-safe key equality, distinct key tuples, one row per key, result columns by name."""

from __future__ import annotations

from functools import reduce

from ratui.engine.errors import RatuiError
from ratui.engine.sql_text import quote

ORD = "__ratui_ord"


RN = "__ratui_rn"


def dedupe(batch, keys: list[str], watermark: str | None):
    """One row per key: the latest by watermark (NULL watermarks lose), ties and no watermark -> last in batch."""
    return latest_per_key(with_arrival(batch), keys, watermark)


def with_arrival(batch):
    """`batch` with each row's place in it (column ORD), taken before any shuffle: latest_per_key's tie-break."""
    return batch.selectExpr("*", f"monotonically_increasing_id() AS {ORD}")


def latest_per_key(ordered, keys: list[str], watermark: str | None):
    """One row per key of a batch numbered by with_arrival(), ORD dropped. A frame already partitioned by the keys
    (range-partitioned by them before it is written, write_files) is not shuffled again."""
    # SQL text: a few JVM round trips instead of several per key column (sql_text.py)
    order = ([f"{quote(watermark)} DESC NULLS LAST"] if watermark else []) + [f"{ORD} DESC"]
    window = f"PARTITION BY {', '.join(quote(k) for k in keys)} ORDER BY {', '.join(order)}"
    return ordered.selectExpr("*", f"row_number() OVER ({window}) AS {RN}").where(f"{RN} = 1").drop(RN, ORD)


def match_keys(left, left_cols: list[str], right, right_cols: list[str]):
    """NULL-safe equality of a tuple of columns (IS NOT DISTINCT FROM)."""
    return reduce(lambda a, b: a & b, [left[f"`{lc}`"].eqNullSafe(right[f"`{rc}`"])
                                       for lc, rc in zip(left_cols, right_cols)])


def key_frame(df, cols: list[str], *, unique: bool = False):
    """The distinct key tuples of `df`, renamed __k0.. so they join with the table without ambiguity. `unique`:
    `df` holds one row per key already (deduplicated): no shuffle to make them distinct."""
    keys = df.selectExpr(*[f"{quote(c)} AS __k{i}" for i, c in enumerate(cols)])
    return keys if unique else keys.distinct()


def col(name: str):
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def resolve_columns(batch, names: tuple[str, ...], code: str, what: str, key: str,
                    hint: str | None = None) -> list[str]:
    """`names` as the batch spells them (case-insensitive); `code` (with `hint`, else its own) for one it lacks."""
    actual = {c.lower(): c for c in batch.columns}
    out = []
    for name in names:
        if name.lower() not in actual:
            raise RatuiError(code, f"{what} '{name}' is not a column of the result of {key} "
                             f"(columns: {', '.join(batch.columns)})", hint=hint)
        out.append(actual[name.lower()])
    return out
