"""The console tests' own helpers (tests/tui/conftest.py) can fail: settle() reports background work that raised,
whether it failed while settle() waited for it or before, and never hides it."""

from __future__ import annotations

import pytest

from .conftest import make_app, run, settle, wait_for


def test_settle_fails_on_a_worker_that_raised(seeded):
    app = make_app(seeded)

    def broken() -> None:
        raise ValueError("nothing handled this")

    async def go():
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)  # the console's own loads: all fine
            worker = app.run_worker(broken, name="broken-before", thread=True, exit_on_error=False)
            await wait_for(pilot, lambda: worker.is_finished and worker not in app.workers, 30)  # ended, forgotten
            with pytest.raises(AssertionError, match="broken-before: ValueError"):
                await settle(pilot)
            app.run_worker(broken, name="broken-during", thread=True, exit_on_error=False)
            with pytest.raises(AssertionError, match="broken-during: ValueError"):
                await settle(pilot)
            await settle(pilot)  # reported once: the console goes on
            assert not app.crashes

    run(go())
