"""Tables a SQL template names itself instead of through ref(), {{ this }} or landing_zone().

`FROM silver.orders` fails only when Spark runs it (no such view), or worse, reads something that is not the
run's branch. The compile step renders the template with placeholders for everything ratui resolves, parses the
result with sqlglot (Spark dialect) and reports every other table name with its template line (RAT-DAG-006).

The check never blocks what it cannot read: a template that does not render without a run, or SQL that sqlglot
cannot parse, is left to Spark at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ratui.engine.errors import RatuiError
from ratui.engine.project.templating import TemplateContext, line_mapper, render
from ratui.engine.vocabulary import LAYERS

PLACEHOLDER = "__ratui_placeholder_"


@dataclass(frozen=True)
class DirectName:
    name: str
    line: int | None


def _context(incremental: bool) -> TemplateContext:
    counter = iter(range(1_000_000))
    return TemplateContext(
        ref=lambda name: f"`{PLACEHOLDER}{next(counter)}`",
        landing_zone=lambda zone: f"`{PLACEHOLDER}{next(counter)}`",
        this=f"`{PLACEHOLDER}this`",
        run_started_at="2000-01-01 00:00:00.000000",
        watermark_value="2000-01-01 00:00:00",
        is_incremental=incremental,
        is_scd2=False,
        start="2000-01-01T00:00:00",
        end="2000-01-02T00:00:00",
    )


def direct_table_names(text: str, file: Path) -> list[DirectName]:
    """Every table name the SQL uses that ratui does not resolve, in both the first-run and the incremental
    rendering of the template; empty when the template or the SQL cannot be analysed statically."""
    return list(_direct_table_names(text, str(file)))


@lru_cache(maxsize=1024)
def _direct_table_names(text: str, filename: str) -> tuple[DirectName, ...]:
    """Parsing SQL costs milliseconds and a file's text rarely changes: one analysis per text."""
    file = Path(filename)
    try:
        import sqlglot
        from sqlglot import exp
    except ImportError:  # pragma: no cover - sqlglot is a dependency
        return ()
    found: dict[str, DirectName] = {}
    for incremental in (False, True):
        try:
            sql = render(text, file, _context(incremental))
        except (RatuiError, Exception):
            continue
        try:
            trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
        except Exception:
            continue
        to_template = line_mapper(text, sql)
        for tree in trees:
            ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
            for table in tree.find_all(exp.Table):
                if not isinstance(table.this, exp.Identifier) or table.find_ancestor(exp.Hint):
                    continue
                name = table.name
                if name.startswith(PLACEHOLDER) or (not table.db and name.lower() in ctes):
                    continue
                full = ".".join(p for p in (table.catalog, table.db, name) if p)
                line = table.this.meta.get("line") if table.this.meta else None
                if full not in found:
                    found[full] = DirectName(full, to_template(line) if line else None)
    return tuple(sorted(found.values(), key=lambda d: (d.line or 0, d.name)))


def check_direct_names(text: str, file: Path) -> None:
    """RAT-DAG-006 for the first table the SQL names directly."""
    names = direct_table_names(text, file)
    if names:
        first = names[0]
        others = f" (and {', '.join(n.name for n in names[1:4])})" if len(names) > 1 else ""
        if _is_file_path(first.name):
            raise RatuiError("RAT-DAG-006", f"'{first.name}' reads a file by its path{others}; a pipeline reads "
                             "files only from a landing zone", file=str(file), line=first.line,
                             hint="Put the file under {namespace}/landing/ZONE/ and read it with "
                                  "{{ landing_zone('ZONE') }}; tables are read with {{ ref('layer.name') }}.")
        parts = first.name.split(".")
        layer = parts[-2] if len(parts) >= 2 and parts[-2] in LAYERS else "LAYER"
        suggestion = f"{{{{ ref('{layer}.{parts[-1]}') }}}}"
        raise RatuiError("RAT-DAG-006", f"table '{first.name}' is named directly{others}; write {suggestion}",
                         file=str(file), line=first.line)


# what Spark reads as a file when it stands where a table would: format.`path`
FILE_FORMATS = {"text", "csv", "json", "parquet", "orc", "avro", "binaryfile", "delta", "iceberg", "jdbc", "xml"}


def _is_file_path(name: str) -> bool:
    head, _, tail = name.partition(".")
    return (head.lower() in FILE_FORMATS and bool(tail)) or "/" in name or "\\" in name or name.startswith("~")
