"""A confined Python pipeline whose run(ctx) returned ends at once with its rows, whatever threads it left running
(issue 49): before, a non-daemon thread held the child's exit until python.timeout, and the run was reported as one
that "ran longer than python.timeout" though run(ctx) had returned at once."""

from __future__ import annotations

import time

from ratui.engine.facade.engine import Engine
from tests.engine.isolation.test_isolated_runs import children_running, project_yaml

LEAVES_A_THREAD = '''# @merge_strategy: full_refresh
import threading
import time


def run(ctx):
    threading.Thread(target=time.sleep, args=(3600,)).start()  # not a daemon: it would hold the exit
    return ctx.spark.createDataFrame([(1, "a"), (2, "b")], "id INT, name STRING")
'''


def test_a_pipeline_that_returned_ends_with_its_rows_whatever_threads_it_left(make_project, spark):
    root = make_project({"demo/pipelines/bronze/threads/pipeline.py": LEAVES_A_THREAD})
    timeout = 90
    project_yaml(root, level="confined", timeout=timeout)
    engine = Engine.open(root)
    began = time.monotonic()
    (result,) = engine.run(engine.compile().select([]))
    took = time.monotonic() - began
    assert result.status == "success", result.error and result.error["message"]
    assert result.rows_written == 2
    assert took < timeout  # it did not wait for the thread until python.timeout
    assert children_running() == []  # and the thread went with its child
    engine.close()
