"""The `ctx` a Python pipeline's `run(ctx)` is given, declared once: its names and what each one does.

Two classes give it, one per way a pipeline runs (python.isolation): run/python_pipeline.py's PythonContext in
ratui's own process (isolation `none`), isolation/child.py's Context in a confined child over a Spark Connect
session (`process`, `confined`, `jail`). Both subclass this protocol, so its docstrings are theirs, and
tests/engine/test_declared_lists.py fails when either lacks a name declared here or takes other arguments.

    def run(ctx):
        orders = ctx.ref("silver.clean_orders")       # a DataFrame read on the run's branch
        return orders.groupBy("customer_id").count()
"""

from __future__ import annotations

from typing import Any, Protocol


class PipelineContext(Protocol):
    """What `run(ctx)` may use. Every table and zone it reads is named by a literal ref() or landing_zone() call
    (project/python_source.py reads them before the run, as the SQL pipelines' refs are)."""

    spark: Any  # the run's SparkSession: ratui's own, or a Spark Connect session in a confined child
    run_started_at: str  # the run's start (UTC), as `{{ run_started_at }}` renders it in SQL
    watermark_value: Any  # the table's largest watermark_column value before this run (None: no watermark column,
    # no table yet, or a full refresh)

    def ref(self, name: str) -> Any:
        """The DataFrame of another pipeline's table ('layer.name' or 'namespace.layer.name'), as the run's branch
        holds it."""
        ...

    def landing_zone(self, zone: str) -> Any:
        """The DataFrame of the landing zone's files this run loads (of the pipeline's own namespace)."""
        ...

    def sql(self, query: str) -> Any:
        """A Spark SQL query's DataFrame (the refs and zones the pipeline reads are views it may name)."""
        ...

    @property
    def this(self) -> Any:
        """The pipeline's own table as the run's branch holds it before this run's write (None when it has none
        yet)."""
        ...

    def is_incremental(self) -> bool:
        """Whether this run adds to the table (an incremental run of an existing table), not rebuilds it."""
        ...

    def is_scd2(self) -> bool:
        """Whether the pipeline's strategy is scd2 (its table keeps versions)."""
        ...
