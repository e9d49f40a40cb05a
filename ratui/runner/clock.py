"""The time the runner decides fires by: the wall clock.

TEST ONLY: RATUI_TEST_CLOCK="ORIGIN:SPEED" (epoch seconds, a factor) runs the runner's schedule clock SPEED times
faster than the wall clock from ORIGIN on: `now = ORIGIN + (wall - ORIGIN) * SPEED`. Cron fires at minutes, so a
test that drives a real `ratui up` with `* * * * *` and SPEED 20 sees a fire every three real seconds; two
runners given the same value share one clock. The lease and every record keep the wall clock. Never set it in
production: schedules would fire SPEED times as often.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

ENV = "RATUI_TEST_CLOCK"


class Clock:
    def __init__(self, spec: str | None = None):
        spec = os.environ.get(ENV) if spec is None else spec
        self.origin, self.speed = 0.0, 1.0
        if spec:
            origin, _, speed = spec.partition(":")
            self.origin, self.speed = float(origin), float(speed or 1)

    @property
    def accelerated(self) -> bool:
        return self.speed != 1.0

    def now(self) -> datetime:
        wall = time.time()
        return datetime.fromtimestamp(self.origin + (wall - self.origin) * self.speed, timezone.utc)

    def wall_seconds_until(self, at: datetime) -> float:
        """Real seconds until the schedule clock reads `at`."""
        return max(0.0, (at - self.now()).total_seconds() / self.speed)
