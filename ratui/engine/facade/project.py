"""The Engine's project side: its settings reloaded, its column lineage, and getting Spark ready for the work a
one-shot command is about to do."""

from __future__ import annotations

from ratui.engine.errors import RatuiError
from ratui.engine.facade.base import EngineBase
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.project.settings import Settings
from ratui.engine.spark import session as spark_mod
from ratui.engine.vocabulary import MAIN


class ProjectPart(EngineBase):
    def apply_settings(self, settings: Settings) -> None:
        """ratui.yaml was reloaded (watch mode): the engine and every part of its state use the new settings."""
        self._state.apply_settings(settings)

    def column_lineage(self, compiled: CompiledProject | None = None):
        """The project's column lineage (project/column_lineage.py ProjectLineage), computed lazily and kept for
        the compile it was made from (the same compile asks again: the same object); a Python pipeline's columns,
        and any table whose own lineage cannot say, are read from its table on main."""
        from ratui.engine.project.column_lineage import ProjectLineage

        compiled = compiled or self.compile()
        with self._lock:
            kept = self._lineage
            if kept is not None and kept.compiled is compiled:
                return kept
            self._lineage = ProjectLineage(compiled, table_columns=self._main_columns)
            return self._lineage

    def _main_columns(self, key: str) -> list[str] | None:
        """The top-level columns of a table on main, or None when it does not exist there."""
        try:
            table = self._state.catalog.load_table(MAIN, key)
        except RatuiError as exc:
            if exc.code == "RAT-CAT-005":
                return None
            raise
        return [f.name for f in table.schema().fields]

    def expect_one_shot(self, keys: list[str], compiled: CompiledProject, *, force: bool = False,
                        full_refresh: bool = False, ref: str = MAIN) -> None:
        """This process runs these pipelines and exits (`ratui run`). When their inputs are small, the JVM it
        starts compiles with Java's quick compiler only (ratui.yaml `spark.jit: auto`, spark/jit.py). When the
        first of them is to run (not unchanged), Spark starts booting now, while the invocation opens the catalog
        and prepares that run."""
        from ratui.engine.run.work_size import input_bytes
        from ratui.engine.spark import jit

        if self.settings.spark_jit == "auto":
            size = input_bytes(compiled, keys, limit=jit.SMALL_INPUT_BYTES)
            small = size is not None and size < jit.SMALL_INPUT_BYTES
            jit.expect_small_work(f"{len(keys)} pipeline(s) reading at most {size:,} bytes" if small else None)
        chosen = set(keys)
        first = next((k for k in keys if not compiled.graph.ancestors(k) & chosen), None)
        if first is None or self.settings.spark_remote:
            return
        try:
            runs = self._parts.decider.decide(compiled.pipelines[first], force=force, full_refresh=full_refresh,
                                              ref=ref).runs
        except Exception:  # the invocation decides again, and reports what went wrong
            return
        if runs:
            spark_mod.start_soon(self.settings)

    def expect_one_shot_query(self) -> None:
        """This process runs one query and exits (`ratui query`): when the project's tables are small, the JVM it
        starts compiles with Java's quick compiler only (spark.jit auto)."""
        from ratui.engine.run.work_size import tables_bytes
        from ratui.engine.spark import jit

        if self.settings.spark_jit == "auto":
            size = tables_bytes(self.root, limit=jit.SMALL_INPUT_BYTES)
            small = size < jit.SMALL_INPUT_BYTES
            jit.expect_small_work(f"a query over tables of at most {size:,} bytes" if small else None)

    def start_spark(self) -> None:
        """Start Spark now (the console warms it up after its first paint), then, when the project has a Python
        pipeline that runs in a child, the data server in the background (start_data_server_early)."""
        spark_mod.get_spark(self.settings)
        self.start_data_server_early()

    def start_data_server_early(self) -> bool:
        """A long-lived process (the console, the warm engine) begins the data server's start in the background
        when a pipeline of the project runs in a child (isolation/early.py); True when a start began or one is up.
        Never raises: the run that needs the server reports what went wrong, with its own code."""
        from ratui.engine.isolation import early

        try:
            storage = self._state.catalog.storage
            return early.start_for(self.compile().pipelines.values(), self.settings, tables_root=storage.root,
                                   tables_remote=storage.remote) is not None
        except Exception:  # noqa: BLE001 - see above
            return False
