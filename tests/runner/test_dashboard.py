"""The Grafana dashboard shipped in docs/grafana/ reads only metrics the runner serves: every `ratui_*` name in its
queries is one the runner's registry exposes (a histogram with the suffixes of its series), so a
renamed metric cannot leave a panel silently empty. No JVM: the registry is the real one, on a real Engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ratui.engine.facade.engine import Engine
from ratui.engine.project.scaffold import init_project
from ratui.runner.metrics import RunnerMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "ratui-runner.json"
SUFFIXES = {"counter": ("",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def test_every_panel_queries_a_metric_the_runner_serves(tmp_path: Path):
    engine = Engine.open(init_project(tmp_path / "p", None))
    status = {"holding_lease": True, "last_loop": "2026-11-29T10:00:00+00:00"}
    metrics = RunnerMetrics(engine, lambda: status, freshness=lambda: [])
    text = metrics.exposition()[0].decode()
    served = {name + suffix for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
              for suffix in SUFFIXES.get(kind, ("",))}
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bratui_[a-z_]+", target["expr"])}
    assert queried and queried <= served, sorted(queried - served)
    assert {"ratui_runs_total", "ratui_run_duration_seconds_bucket", "ratui_freshness_age_seconds"} <= queried
    metrics.unsubscribe()
    engine.close()
