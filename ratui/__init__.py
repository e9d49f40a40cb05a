"""ratui: a local lakehouse operations console (Spark + Iceberg + SQLite, in the terminal).

From Python: `ratui.open(path)` (ratui/api/). The names are loaded when first used, so `import ratui` (which the
command line does too) stays light: no PyIceberg, pandas, Spark or Textual.
"""

from typing import Any

from ratui.version import __version__

__all__ = ["__version__"]

_API = ("open", "Project", "Branch", "Table", "Scan", "Query", "RunResult", "PipelineRun", "RunHandle", "Phase",
        "TestResult", "PipelineInfo", "RefInfo", "RunRecord", "RunError", "SnapshotInfo", "Records", "RatuiError",
        "load_ipython_extension", "unload_ipython_extension")


def __getattr__(name: str) -> Any:
    if name in _API:
        import ratui.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'ratui' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
