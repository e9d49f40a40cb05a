"""The Engine's alerts (alerts.md): the rules of ratui.yaml's `alerts:` read against every run this Engine ends,
sent by engine/alerts/ on a thread of its own; what was attempted; a test message to a channel.

    engine.alert_attempts(limit=50)              # ratui alerts: sent, failed (why), suppressed (why)
    engine.send_test_alert("ops")                # ratui alerts test ops
    engine.close()                               # waits (bounded) for the alerts still pending
"""

from __future__ import annotations

import time
from typing import Any

from ratui.engine.errors import RatuiError, did_you_mean
from ratui.engine.events import Event
from ratui.engine.facade.base import EngineBase

SELECTION_SECONDS = 30.0  # how long a rule's selection is reused before the project is compiled again for it


class AlertsPart(EngineBase):
    def _alerts_on_event(self, event: Event) -> None:
        """Subscribed by Engine.__init__: costs nothing while ratui.yaml has no alert rules."""
        if not self.settings.alerts.rules:
            return
        dispatcher = self._alert_dispatcher()
        dispatcher.alerts = self.settings.alerts  # a console that read ratui.yaml again uses its rules now
        dispatcher.on_event(event)

    def _alert_dispatcher(self):
        from ratui.engine.alerts.dispatch import Dispatcher

        state = self._alert_state()
        with self._lock:
            dispatcher = getattr(self, "_alerts", None)
            if dispatcher is None:  # it flushes as the process ends (dispatch.flush_all), bounded
                dispatcher = self._alerts = Dispatcher(self.settings.alerts, state, self._selected,
                                                       self.settings.namespace, self.root)
            return dispatcher

    def _alert_state(self):
        from ratui.engine.state.alert_state import AlertState

        with self._lock:
            state = getattr(self, "_alerts_db", None)
            if state is None:
                state = self._alerts_db = AlertState(self.settings.db_path)
            return state

    def _selected(self, select: str | None) -> set[str] | None:
        """The pipelines a rule's select names now (None: every pipeline); a select that names none: none."""
        if select is None:
            return None
        cache: dict[str, tuple[float, set[str]]] = self.__dict__.setdefault("_alert_selections", {})
        kept = cache.get(select)
        if kept is not None and time.monotonic() - kept[0] < SELECTION_SECONDS:
            return kept[1]
        try:
            chosen = set(self.compile().select(select.split()))
        except RatuiError:
            chosen = set()  # `ratui check` names the rule (RAT-ALR-002)
        cache[select] = (time.monotonic(), chosen)
        return chosen

    def flush_alerts(self, timeout: float | None = None) -> None:
        """Wait (bounded) for the alerts still pending: a command sends what its runs caused before it exits."""
        dispatcher = getattr(self, "_alerts", None)
        if dispatcher is not None:
            from ratui.engine.alerts.dispatch import FLUSH_SECONDS

            dispatcher.flush(FLUSH_SECONDS if timeout is None else timeout)

    def _has_rule(self, on: str) -> bool:
        return any(rule.on == on for rule in self.settings.alerts.rules)

    def alert_runs_going(self) -> None:
        """The runner, every loop: runs queued or running longer than a `stuck` rule's `after` alert (once each)."""
        if self._has_rule("stuck"):
            going = [run for status in ("running", "queued")
                     for run in self._state.history.list_runs(1000, status=status)]
            self._alert_dispatcher().runs_going(going)

    def alert_missed(self, schedule: str, fires: list[tuple[str, str, str]]) -> None:
        """The runner, when it records fires not run as planned: `missed` rules alert."""
        if fires and self._has_rule("missed"):
            self._alert_dispatcher().fires_missed(schedule, fires)

    # ------------------------------------------------------------------------------------------ reads and tests
    def alert_channels(self) -> list[dict[str, Any]]:
        from ratui.engine.alerts.channels import target_of

        out = []
        for name, channel in self.settings.alerts.channels.items():
            out.append({"channel": name, "kind": "command" if channel.command else "url",
                        "url_env": channel.url_env, "target": target_of(channel, _environ()),
                        "rules": [r.name for r in self.settings.alerts.rules if name in r.notify],
                        "max_per_hour": channel.max_per_hour, "retries": channel.retries,
                        "timeout_seconds": channel.timeout_seconds})
        return out

    def alert_attempts(self, limit: int = 100, channel: str | None = None) -> list[dict[str, Any]]:
        return self._alert_state().attempts(limit, channel)

    def send_test_alert(self, channel: str) -> dict[str, Any]:
        """One test message to `channel` (RAT-ALR-004 when ratui.yaml declares no such channel), recorded."""
        from ratui.engine.alerts.dispatch import send_test

        channels = self.settings.alerts.channels
        if channel not in channels:
            raise RatuiError("RAT-ALR-004", f"no alert channel '{channel}' in ratui.yaml",
                             hint=did_you_mean(channel, list(channels)) if channels else
                             "ratui.yaml declares no alert channels: alerts: {channels: {ops: {url_env: VARIABLE}}}")
        return send_test(self.settings.alerts, self._alert_state(), channel, self.settings.namespace)


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
