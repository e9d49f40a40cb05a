"""ratui's Python API, for scripts and notebooks: `ratui.open(path)` and what it gives (see project.py).

One job per module: project (Project, open), tables (Table, Scan: PyIceberg, no JVM), queries (Query: lazy SQL on
Spark), runs (RunResult, PipelineRun, RunHandle), branch (Branch, the `with` rule), records (typed lists),
html (Jupyter's rich display), convert (pandas, polars), magic (IPython's %ratui_open and %%ratui_sql).
Importing this package starts nothing and imports neither PyIceberg, pandas nor Spark.
"""

from __future__ import annotations

from ratui.api.branch import Branch
from ratui.api.magic import load_ipython_extension, unload_ipython_extension
from ratui.api.project import Project, open
from ratui.api.queries import Query
from ratui.api.records import PipelineInfo, Records, RefInfo, RunError, RunRecord, SnapshotInfo
from ratui.api.runs import Phase, PipelineRun, RunHandle, RunResult, TestResult
from ratui.api.tables import Scan, Table
from ratui.engine.errors import RatuiError

__all__ = ["open", "Project", "Branch", "Table", "Scan", "Query", "RunResult", "PipelineRun", "RunHandle", "Phase",
           "TestResult", "PipelineInfo", "RefInfo", "RunRecord", "RunError", "SnapshotInfo", "Records",
           "RatuiError", "load_ipython_extension", "unload_ipython_extension"]
