"""The data server started ahead of the run that needs it.

An invocation whose selection holds a Python pipeline that will run in a child (isolation process, confined or
jail, as levels.py decides on this machine) begins the data server's start as soon as it is planned, in the
background, while the branch and config phases and the SQL pipelines upstream run; a long-lived ratui process
(the warm engine's warm-up, the console's Spark start) begins it when the project has such a pipeline. The run
that needs the server then waits for that start (bounded as always) instead of beginning one; a start that failed
is that run's error (RAT-ISO-005), never another run's. No such pipeline: no data server.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

from ratui.engine.isolation import data_server, fork_server
from ratui.engine.isolation.levels import decide
from ratui.engine.project import isolation_levels
from ratui.engine.project.discovery import Pipeline
from ratui.engine.project.settings import Settings

log = logging.getLogger("ratui.isolation")


def child_level(pipeline: Pipeline, settings: Settings, *, tables_remote: bool) -> str | None:
    """The level a Python pipeline's child would run at on this machine, or None when it runs in-process (a SQL
    pipeline, isolation none, or a machine that gives none). Never raises: the run reports what is wrong."""
    if pipeline.kind != "python" or pipeline.config is None or pipeline.errors:
        return None
    try:
        isolation = decide(pipeline.config.isolation or settings.python_isolation,
                           spark_is_local=settings.spark_is_local, tables_on_disk=not tables_remote, required=False)
    except Exception:  # noqa: BLE001 - the run decides again and reports it
        return None
    return isolation.level if isolation.isolated else None


def server_reads(settings: Settings, tables_root: Path) -> tuple[Path, ...]:
    """The folders of the project's tables the data server reads: each namespace's warehouse folder."""
    root = settings.root
    namespaces = {p.name for p in root.iterdir() if (p / "pipelines").is_dir()} | {settings.namespace}
    return tuple(tables_root / ns / "warehouse" for ns in sorted(namespaces))


def start_for(pipelines: Iterable[Pipeline], settings: Settings, *, tables_root: Path,
              tables_remote: bool) -> data_server.EarlyStart | None:
    """Begin the data server's start when one of `pipelines` runs in a child; returns at once (the start, or None
    when none of them needs a server). The first such pipeline's level decides whether the server is confined."""
    from ratui.engine.spark import jit

    for pipeline in pipelines:
        level = child_level(pipeline, settings, tables_remote=tables_remote)
        if level is None:
            continue
        if level == "confined" and os.environ.get("RATUI_FORK_SERVER", "1") != "0":
            fork_server.server(settings.state_dir)  # the warm template imports meanwhile (fork_server.py)
        try:
            return data_server.start_early(settings.root, settings.state_dir, server_reads(settings, tables_root),
                                           settings.spark_config, confined=level in isolation_levels.CONFINED,
                                           java_option=jit.java_option(settings))
        except Exception as exc:  # noqa: BLE001 - the run that needs the server starts it and reports
            log.info("the data server was not started early: %s", exc)
            return None
    return None
