"""The Engine's freshness: how old each table with a `freshness` is on main (since its pipeline's last successful
run there), and whether that is fresh, a warning or an error (`ratui check --freshness`, the runner's alerts).

    rows = engine.freshness()            # pipeline, warn_after, error_after, last_success, age_seconds, state
    engine.alert_freshness()             # the runner, every loop: `on: freshness` rules alert on a change
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ratui.engine.facade.base import EngineBase
from ratui.engine.project.compiler import CompiledProject
from ratui.engine.vocabulary import MAIN, parse_time


class FreshnessPart(EngineBase):
    def freshness(self, compiled: CompiledProject | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
        """Every pipeline that declares a freshness, oldest table first (a table never built first of all)."""
        compiled = compiled or self.compile()
        now = now or datetime.now(timezone.utc)
        rows = []
        for key in sorted(compiled.pipelines):
            config = compiled.pipelines[key].config
            if config is None or config.freshness is None:
                continue
            last = self._state.history.last_success(key, MAIN)
            at = parse_time(last["finished_at"]) if last else None
            age = (now - at).total_seconds() if at else None
            rows.append({"pipeline": key, **config.freshness.to_dict(), "last_success": last["finished_at"] if last
                         else None, "run_id": last["id"] if last else None,
                         "age_seconds": round(age, 1) if age is not None else None,
                         "state": config.freshness.state(age)})
        return sorted(rows, key=lambda r: -(r["age_seconds"] if r["age_seconds"] is not None else float("inf")))

    def alert_freshness(self, compiled: CompiledProject | None = None) -> list[dict[str, Any]]:
        """Check freshness and hand it to the alerts (`on: freshness` rules alert when a table goes stale, or from a
        warning to an error: once per change). Returns the rows."""
        rows = self.freshness(compiled)
        if rows and any(rule.on == "freshness" for rule in self.settings.alerts.rules):
            self._alert_dispatcher().freshness_checked(rows)  # type: ignore[attr-defined]
        return rows
