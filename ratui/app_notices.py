"""What the App tells the user: toasts (each one also kept in `notices`, newest last), the ends of runs, batches,
atomic publishes and reaper passes, and the error screen for what broke (its traceback in .ratui/logs/console.log).

`Notices` is a mixin of RatuiApp (it uses the App's screen stack, root and `reaper_changed` signal).
"""

from __future__ import annotations

import time
import traceback


from ratui.console.controller import utc_now
from ratui.console.format import batch_summary, fmt_ms, on_ref, short_key
from ratui.console.live import LiveRun
from ratui.console.shell_engine import detail as engine_detail
from ratui.engine.errors import RatuiError
from ratui.messages import AlertsRead, ShellEngineDetail
from ratui.screens.dialogs import ErrorScreen
from ratui.screens.run import RunScreen


class Notices:
    """Toasts and the error screen."""

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        self.notices.append(f"{title}: {message}" if title else message)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # --------------------------------------------------------------------------- runs, batches, reaper

    def _toast(self, run: LiveRun) -> None:
        screen = self.screen
        if isinstance(screen, RunScreen) and screen.run_id == run.run_id:
            return  # it is on screen already
        name = short_key(run.pipeline, run.pipeline.split(".")[0])
        if run.status == "success":
            extra = f", {run.warnings} quality warning(s)" if run.warnings else ""
            self.notify(f"{name} succeeded in {fmt_ms(run.duration_ms)}: {run.rows_written or 0:,} rows{extra}.",
                        title="Run finished", severity="warning" if run.warnings else "information", markup=False)
        elif run.status == "failed":
            code = (run.error or {}).get("code", "")
            self.notify(f"{name} failed: {code} {on_ref((run.error or {}).get('message', ''), run.ref)}",
                        title="Run failed", severity="error", timeout=10, markup=False)
        elif run.status == "cancelled":
            self.notify(f"{name} was cancelled; {run.ref} is unchanged.", title="Run cancelled", severity="warning",
                        markup=False)
        elif run.outcome == "upstream":
            self.notify(f"{name} was not run: {run.reason or 'an upstream run failed'}.", title="Run skipped",
                        severity="warning", markup=False)
        elif run.outcome == "unchanged" and not run.batch:
            # a batch reports its unchanged pipelines together; a single run says why nothing ran, and what to do
            self.notify(f"{name}: nothing to do, {run.reason or 'unchanged'}. F forces a run.", title="Unchanged",
                        markup=False)

    def _batch_done(self, batch) -> None:
        results = list(batch.results)
        errors = [batch.error] if batch.error is not None and not isinstance(batch.error, RatuiError) else []
        text, clean = batch_summary(results, len(batch.keys), batch.cancelled)
        self.notify(text, title="Batch finished", severity="information" if clean else "warning", markup=False)
        if getattr(batch, "atomic", False):
            self._publish_done(batch)
        for error in errors:
            self.show_error(error, "running the batch")

    def _publish_done(self, batch) -> None:
        """An atomic publish ended: what landed on its ref in one commit, or why nothing did."""
        outcome = batch.publish
        if outcome is None:
            self.notify(f"NOT published: {batch.ref} unchanged (the publish did not finish: "
                        f"{batch.error or 'no outcome'}).", title="Publish", severity="error", timeout=12,
                        markup=False)
        elif outcome.merged:
            if outcome.commit:
                text = (f"Published {len(outcome.tables)} table(s) into {outcome.into} in one commit "
                        f"{outcome.commit[:12]}: {', '.join(short_key(t, t.split('.')[0]) for t in outcome.tables)}.")
            else:
                text = outcome.reason[:1].upper() + outcome.reason[1:] + "."  # nothing to publish: ...
            self.notify(text, title="Publish", timeout=8, markup=False)
        else:
            code = f"{outcome.error.get('code')} " if outcome.error else ""
            self.notify(f"NOT published: {code}{outcome.reason}.", title="Publish", severity="error", timeout=12,
                        markup=False)

    def reaper_finished(self, report, scheduled: bool = False) -> None:
        """A real pass ended (scheduled or run now): say what it did and refresh the Reaper screen."""
        from ratui.engine.vocabulary import format_bytes
        from ratui.screens.reaper import TASK_TITLES

        if not scheduled or report.removed or report.errors:
            text = f"{report.removed} removed of {report.found} found, {format_bytes(report.bytes_freed)} freed."
            for name, error in report.errors:
                text += f"\n{TASK_TITLES.get(name, name)}: {(error or {}).get('code', '')} " \
                        f"{(error or {}).get('message', '')}"
            self.notify(text, title="Scheduled reaper" if scheduled else "Reaper",
                        severity="warning" if report.errors else "information", timeout=6, markup=False)
        self.reaper_changed.publish(report)

    # ------------------------------------------------------------------------------------------ engines

    def action_engines(self) -> None:
        """Which Spark serves the console's runs, and what the shell's warm engine holds (asked afresh)."""
        self.background(self.controller.shell_engine, ShellEngineDetail, "asking the shell's warm engine",
                        group="shell-engine-detail", exclusive=True)

    def on_shell_engine_detail(self, message: ShellEngineDetail) -> None:
        self.shell_engine = message.value
        self.notify(engine_detail(message.value, self.spark_where if self.spark_state != "idle" else "",
                                  self.now().timestamp()), title="Engines", timeout=15, markup=False)

    # ------------------------------------------------------------------------------------------ alerts

    def action_alerts(self) -> None:
        """The alert rules and channels, and the newest attempts (as `ratui alerts`)."""
        self.background(self.controller.alerts_notice, AlertsRead, "reading the alert attempts",
                        group="alerts-notice", exclusive=True)

    def on_alerts_read(self, message: AlertsRead) -> None:
        self.notify(message.value, title="Alerts", timeout=15, markup=False)

    # ------------------------------------------------------------------------------------------ errors

    def show_error(self, error: BaseException, context: str = "") -> None:
        log_file = self._log_error(error, context)
        if isinstance(self.screen, ErrorScreen):
            return
        # the same failure again soon after (a screen that follows the database reloads on its own): a toast,
        # not the error screen over and over
        key = f"{type(error).__name__}: {error}"
        now = time.monotonic()
        if self._last_error is not None and self._last_error[0] == key and now - self._last_error[1] < 30:
            self.notify(f"{key} (again; details in .ratui/logs/console.log)", title="Error", severity="error",
                        timeout=5, markup=False)
            return
        self._last_error = (key, now)
        self.push_screen(ErrorScreen(error, context, log_file))

    def _log_error(self, error: BaseException, context: str) -> str | None:
        if isinstance(error, RatuiError):
            return None
        try:
            path = self.root / ".ratui" / "logs" / "console.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(f"--- {utc_now().isoformat()} {context}\n")
                fh.write("".join(traceback.format_exception(type(error), error, error.__traceback__)))
            return ".ratui/logs/console.log"
        except OSError:
            return None
