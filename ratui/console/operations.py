"""What the console changes or starts: runs and batches, their cancelling, merges, branches, rollbacks, undo, landing
resets, reaper passes, pausing schedules, watch mode and the Iceberg REST catalog it can serve to other engines.

A mixin of Controller: every method blocks (SQLite, the catalog, Spark), so the App calls them from thread workers.
Each asks `_writable` first, so a read-only console refuses the change here, whatever path reached it (the App
refuses it earlier with a toast). Textual-free.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ratui.console.pump import Batch, BatchItem, WatchItem
from ratui.console.records import ref_kind
from ratui.engine.errors import RatuiError
from ratui.engine.vocabulary import MAIN

if TYPE_CHECKING:
    from ratui.engine.run.invocation import Invocation


READ_ONLY_CODE = "RAT-ACC-001"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# where a client of the console's REST catalog finds its token (its 401 says so)
TOKEN_FROM = "the token the console's Iceberg REST catalog dialog showed: i on Branches, or the palette"


@dataclass(frozen=True)
class Serving:
    """The console's Iceberg REST catalog: its URI for the console's working ref `ref` (another ref: /iceberg/REF)
    and the token it wants."""

    url: str
    token: str
    ref: str
    read_only: tuple[str, ...]
    moved_from: tuple[str, ...] = ()  # earlier folders of the project its tables' files are still recorded under


def read_only_refusal(what: str) -> RatuiError:
    """The refusal of a read-only console (ratui tui --read-only, ratui web --read-only), naming what it refused."""
    return RatuiError(READ_ONLY_CODE, f"this console is read-only: {what} is refused",
                      hint="It was started with --read-only (ratui tui --read-only, or a ratui web server started "
                           "so): it shows the project and runs queries that read, nothing else.")


class Operations:
    """The controller's changes (Controller's __init__ sets the state they use: engine, ref, batches, watcher)."""

    def _writable(self, what: str) -> None:
        if self.read_only:
            raise read_only_refusal(what)

    # -------------------------------------------------------------------------------------------- runs

    def start(self, key: str, *, full_refresh: bool = False, force: bool = False) -> str:
        """Run one pipeline on the working ref in the background (`force`: even when nothing changed); returns its
        run id at once. A working ref that is gone raises RAT-CAT-002 before anything runs."""
        self._writable("running a pipeline")
        return self.require_engine().start([key], trigger="console", full_refresh=full_refresh,
                                           force=force, ref=self.ref).run_ids[0]

    def start_batch(self, keys: list[str], *, full_refresh: bool = False, force: bool = False,
                    atomic: bool = False) -> Batch:
        """Run `keys` in order on the working ref in the background (a pipeline whose upstream failed is skipped).
        `atomic`: on a publish branch, merged into the working ref in one commit only if every run passed (the
        batch's `publish` says what happened). Returns at once."""
        self._writable("running pipelines")
        batch = Batch(uuid.uuid4().hex[:12], list(keys), full_refresh, ref=self.ref, atomic=atomic)
        self.batches[batch.id] = batch  # before its runs are queued: their RunQueued events name it
        try:
            batch.invocation = self.require_engine().start(
                batch.keys, trigger="console", full_refresh=full_refresh, force=force, invocation_id=batch.id,
                on_result=batch.results.append, on_done=lambda inv: self._batch_ended(batch, inv), ref=batch.ref,
                atomic=atomic)
        except BaseException:  # a bad working ref (RAT-CAT-002/-012): nothing was queued
            self.batches.pop(batch.id, None)
            raise
        return batch

    def _batch_ended(self, batch: Batch, invocation: "Invocation") -> None:
        batch.invocation = invocation  # (an invocation may end before start() has returned it)
        self._post(BatchItem(batch))

    def cancel(self, run_id: str, *, whole_batch: bool = True) -> str:
        """Cancel the run; a run of a batch stops the batch too (its run in flight now, and the rest unstarted)."""
        self._writable("cancelling a run")
        batch = self.batch_of(run_id) if whole_batch else None
        outcome = self.require_engine().cancel(run_id)
        if batch is not None and batch.invocation is not None:
            current = batch.current
            batch.invocation.cancel()
            if current and current != run_id:
                outcome = "requested"
        return outcome

    def cancel_all(self, timeout: float = 10.0) -> None:
        engine = self.engine
        for batch in self.batches.values():
            if batch.invocation is not None and not batch.done:
                batch.invocation.cancel()
        active = engine.active_runs() if engine else []
        for run_id in active:
            engine.cancel(run_id)
        deadline = time.monotonic() + timeout
        for run_id in active:
            engine.wait(run_id, max(0.0, deadline - time.monotonic()))

    def spark_started(self) -> bool:
        from ratui.engine.spark import session as spark_mod

        return spark_mod.is_started()

    def prewarm_spark(self) -> None:
        self.require_engine().start_spark()

    # ---------------------------------------------------------------------------------------- branches

    def merge(self, ref: str, into: str = MAIN):
        self._writable("merging a branch")
        return self.require_engine().merge(ref, into=into, message=f"console: merge {ref} into {into}")

    def create_branch(self, name: str, from_ref: str = MAIN):
        """A branch of the user's (RAT-CAT-001 exists, -006 bad name, -012 reserved, -010 unknown past state)."""
        self._writable("creating a branch")
        return self.require_engine().create_branch(name.strip(), from_ref=from_ref.strip() or MAIN)

    def delete_branch(self, ref: str) -> bool:
        """Delete a branch (a user's, or a dead run's). Returns True when it was the working ref, which is then
        main again."""
        self._writable("deleting a branch")
        self.require_engine().delete_branch(ref)
        if self.ref == ref:
            self.ref = MAIN
            return True
        return False

    def switch_ref(self, ref: str) -> str:
        """Make `ref` the working ref (main or a user's branch that exists); returns it. Raises RAT-CAT-012 for a
        run's or a publish's branch, RAT-CAT-007 for a past state, RAT-CAT-002 for a ref that is not there."""
        ref = ref.strip()
        if "@" in ref:
            raise RatuiError("RAT-CAT-007", f"{ref} is a past state: runs write to a branch's head",
                             hint=f"Create a branch from it (n on Branches, from {ref}) and work on that.")
        if ref_kind(ref) in ("run", "publish"):
            raise RatuiError("RAT-CAT-012", f"'{ref}' is a branch ratui keeps for a run or a publish",
                             hint="Work on main or on a branch of your own (n on Branches creates one).")
        self.require_engine().resolve_ref(ref)
        self.ref = ref
        return ref

    def rollback(self, plan):
        self._writable("rolling back")
        return self.require_engine().rollback(plan)

    def plan_undo(self, ref: str | None = None):
        """What undo (`z`) would reverse (with `ref`: the newest action on that ref) and what changes (an UndoPlan;
        nothing changed). RAT-UNDO-001 nothing to undo, -002 later commits built on it (named), -003 what it needs is
        gone."""
        self._writable("undoing")
        return self.require_engine().plan_undo(ref)

    def undo(self, plan) -> dict:
        self._writable("undoing")
        return self.require_engine().undo(plan)

    # --------------------------------------------------------------------------------- landing, reaper

    def landing_reset(self, zone: str, file: str | None = None, pipeline: str | None = None) -> int:
        self._writable("resetting landing files")
        return self.require_engine().landing_reset(zone, file=file, pipeline=pipeline)

    def reaper_run(self, dry_run: bool) -> Any:
        if not dry_run:
            self._writable("a reaper pass")
        return self.require_engine().reap(dry_run=dry_run)

    def pause_schedule(self, name: str, paused: bool, compiled: Any = None) -> bool:
        """Pause (or resume) schedule `name`, persisted as `ratui schedule pause|resume NAME` does (RAT-SCH-005:
        no such schedule). Returns `paused`."""
        self._writable("pausing or resuming a schedule")
        self.require_engine().pause_schedule(name, paused, compiled)
        return paused

    # ------------------------------------------------------------------------------------------- watch

    def make_watcher(self, on_event: Callable[[Any], None]):
        """A Watcher on the console's engine: its runs go through the engine's bus like any other run."""
        from ratui.engine.watch.watcher import Watcher

        return Watcher(engine=self.require_engine(), on_event=on_event, ref=lambda: self.ref)

    def start_watch(self, timeout: float = 10.0) -> str:
        """Watch mode on: its events reach the App through this controller's queue."""
        self._writable("watch mode (it runs pipelines)")
        if self.watcher is None:
            self.watcher = self.make_watcher(lambda event: self._post(WatchItem(event)))
        self.watcher.start(timeout=timeout)
        return self.watcher.state

    def stop_watch(self, timeout: float = 30.0) -> str:
        if self.watcher is not None:
            self.watcher.stop(timeout=timeout)
        return "off"

    # ------------------------------------------------------------------- the Iceberg REST catalog (ratui serve)

    def start_serving(self, port: int | None = None) -> Serving:
        """Serve the project's catalog to other engines, as `ratui serve` does (127.0.0.1, a fresh token, main
        read-only to them), from this process until stop_serving() or the console's end. Refused in a read-only
        console: outside engines could then write to branches. On ratui serve's port (8181) when it is free, else
        on a free one (another console or `ratui serve` has it); a `port` given is that port or RAT-REST-001."""
        self._writable("serving the catalog to other engines (they may write to branches)")
        server = self.rest_server
        if server is None or not server.running:
            from ratui import rest

            catalog = self.require_engine().state.catalog
            ports = [port] if port else [rest.DEFAULT_PORT, 0]
            for candidate in ports:
                try:
                    options = rest.RestOptions(port=candidate or _free_port(), token_from=TOKEN_FROM)
                    server = rest.RestServer(self.root, options, catalog=catalog).start()
                    break
                except RatuiError as exc:
                    if exc.code != "RAT-REST-001" or candidate == ports[-1]:
                        raise
            self.rest_server = server
        return Serving(url=server.url_of(self.ref), token=server.token, ref=self.ref,
                       read_only=tuple(sorted(server.options.read_only)), moved_from=tuple(server.moved_from()))

    def stop_serving(self) -> None:
        server, self.rest_server = self.rest_server, None
        if server is not None:
            server.stop()
