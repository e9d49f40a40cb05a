"""The failpoints the tests drive a run with (ratui/engine/failpoints.py): a hold keeps the thread that reaches its
point until the gate file exists and says it got there; a point of another name, or no failpoint set, passes."""

from __future__ import annotations

import threading
import time

from ratui.engine import failpoints
from ratui.engine.failpoints import failpoint


def test_a_hold_keeps_the_thread_at_its_point_until_the_gate_opens(monkeypatch, tmp_path):
    gate = tmp_path / "gate"
    monkeypatch.setenv(failpoints.FAILPOINT_ENV, "hold:quality:demo.bronze.x")
    monkeypatch.setenv(failpoints.GATE_ENV, str(gate))
    failpoint("kill:quality")  # another point (any pipeline's quality): passes at once
    failpoint("kill:quality:demo.bronze.y")
    assert not (tmp_path / "gate.reached").exists()

    held = threading.Thread(target=failpoint, args=("kill:quality:demo.bronze.x",), daemon=True)
    held.start()
    reached = tmp_path / "gate.reached"
    deadline = time.monotonic() + 30
    while not reached.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reached.exists()
    assert held.is_alive()  # at its point, the gate shut: there it stays
    gate.touch()
    held.join(30)
    assert not held.is_alive()


def test_without_a_failpoint_every_point_passes(monkeypatch, tmp_path):
    monkeypatch.delenv(failpoints.FAILPOINT_ENV, raising=False)
    for name in ("kill:quality", "kill:commit", "kill:merged"):
        failpoint(name)
    monkeypatch.setenv(failpoints.FAILPOINT_ENV, "kill:commit")
    failpoint("kill:compact")  # another point: no kill
