"""When the warm engine's JVM collects its garbage in full, so that its memory stays near what it holds.

Left alone, a JVM that serves command after command lets its heap grow towards its cap (spark.driver.memory) before
it collects in full: G1 prefers a bigger heap to more frequent collections, and gives memory back only after a full
collection or a periodic one, which an engine that is never idle for a minute does not get. Measured on the sample
project (benchmarks/warm_memory.py): the engine's RSS 1.47x after 60 forced runs of what it was after 10, all of it
the JVM's heap. So the engine asks for a full collection itself, on its own thread, between commands:

- when no command has come for IDLE_SECONDS after one ended (a person at a shell: the collection happens while they
  read the output), and
- after every EVERY_COMMANDS commands when commands keep coming (a script), at a moment no command is in flight.

A full collection of the engine's heap takes a fraction of a second of the JVM's time; a command that arrives during
it waits that long. Nothing is collected on Spark Connect: the server's heap is not ours.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

IDLE_SECONDS = 2.0
EVERY_COMMANDS = 10


class Collector:
    """Counts the commands since the last full collection and says when the next one is due."""

    def __init__(self, collect: Callable[[], bool], log: Callable[[str], None]) -> None:
        self._collect = collect
        self._log = log
        self._lock = threading.Lock()
        self.since_last = 0  # commands ended since the last collection
        self.collections = 0
        self.running = False

    def command_ended(self, in_flight: int) -> None:
        """A command ended; `in_flight`: how many others still run. Collects (on a thread) after EVERY_COMMANDS."""
        with self._lock:
            self.since_last += 1
            due = self.since_last >= EVERY_COMMANDS and not in_flight and not self.running
        if due:
            self._start()

    def idle(self, in_flight: int, idle_seconds: float) -> None:
        """The engine's tick: collects when a command ended since the last collection and none came for
        IDLE_SECONDS."""
        with self._lock:
            due = self.since_last > 0 and not in_flight and idle_seconds >= IDLE_SECONDS and not self.running
        if due:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self.running:
                return
            self.running = True
            self.since_last = 0
        threading.Thread(target=self._run, name="ratui-engine-gc", daemon=True).start()

    def _run(self) -> None:
        began = time.monotonic()
        try:
            if self._collect():
                self.collections += 1
                self._log(f"full collection of the JVM's heap in {time.monotonic() - began:.2f} s")
        except Exception as exc:  # a JVM going away under it: the next command finds out, not this thread
            self._log(f"the JVM's heap could not be collected: {exc}")
        finally:
            with self._lock:
                self.running = False
