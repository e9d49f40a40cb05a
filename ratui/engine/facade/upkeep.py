"""The Engine's upkeep: the reaper (ops/reaper.py) that cleans up after runs, and undo (ops/undo.py) that reverses
the last action."""

from __future__ import annotations

from ratui.engine.facade.base import EngineBase


class UpkeepPart(EngineBase):
    def reaper(self, *, clock=None):
        """The reaper of this project (ops/reaper.py): it fails stuck runs through the run record and interrupts
        this process's own through its runs in flight."""
        from ratui.engine.ops.reaper import Reaper

        return Reaper(self._state, record=self._record, in_flight=self._in_flight, clock=clock, bus=self._bus)

    def reap(self, *, dry_run: bool = False, tasks=None):
        return self.reaper().run(dry_run=dry_run, tasks=tasks)

    def plan_undo(self, ref: str | None = None):
        """What `undo` would reverse (with `ref`: the newest action on that ref), and how (ops/undo.py); nothing is
        changed."""
        from ratui.engine.ops import undo

        return undo.plan(self._state, ref)

    def undo(self, plan):
        from ratui.engine.ops import undo

        return undo.apply(self._state, plan)
