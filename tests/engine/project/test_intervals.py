"""Intervals of incremental_by_time pipelines and backfill plans, without Spark: boundaries (hours, days, calendar
months), what a table has done and what is due, a plan of 10,000 hourly intervals in well under a second without
an object per interval, the order intervals run in across pipelines, and the coded errors of a bad range."""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import dataclass
from datetime import datetime

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.project import intervals
from ratui.engine.project.compiler import compile_project
from ratui.engine.project.settings import load_settings
from ratui.engine.run import backfill

D = datetime


@dataclass
class Cfg:
    batch: str = "day"
    lookback: int = 0
    start: str | None = None


def test_boundaries_of_hours_days_and_calendar_months():
    assert intervals.floor(D(2026, 3, 5, 7, 30), "hour") == D(2026, 3, 5, 7)
    assert intervals.ceil(D(2026, 3, 5, 7, 30), "day") == D(2026, 3, 6)
    assert intervals.step(D(2026, 12, 1), "month") == D(2027, 1, 1)
    assert intervals.step(D(2026, 1, 1), "month", -1) == D(2025, 12, 1)
    assert intervals.count(D(2026, 1, 1), D(2026, 4, 1), "day") == 90
    assert intervals.count(D(2026, 1, 1), D(2027, 1, 1), "month") == 12
    assert list(intervals.walk([(D(2026, 1, 30), D(2026, 2, 2))], "day")) == [
        (D(2026, 1, 30), D(2026, 1, 31)), (D(2026, 1, 31), D(2026, 2, 1)), (D(2026, 2, 1), D(2026, 2, 2))]
    assert intervals.parse_time("2026-03-01T06:00:00+01:00") == D(2026, 3, 1, 5)  # UTC, zone dropped
    with pytest.raises(RatuiError) as caught:
        intervals.parse_time("2026-02-30")
    assert caught.value.code == "RAT-BKF-001"


def test_done_sets_merge_and_what_is_missing_is_their_complement():
    done = intervals.merged([(D(2026, 1, 3), D(2026, 1, 5)), (D(2026, 1, 1), D(2026, 1, 3)),
                             (D(2026, 1, 8), D(2026, 1, 9))])
    assert done == [(D(2026, 1, 1), D(2026, 1, 5)), (D(2026, 1, 8), D(2026, 1, 9))]
    assert intervals.minus((D(2026, 1, 1), D(2026, 1, 10)), done) == [
        (D(2026, 1, 5), D(2026, 1, 8)), (D(2026, 1, 9), D(2026, 1, 10))]
    text = intervals.summary("day", done)[intervals.PROPERTY]
    assert text == ('{"batch":"day","done":[["2026-01-01T00:00:00","2026-01-05T00:00:00"],'
                    '["2026-01-08T00:00:00","2026-01-09T00:00:00"]]}')


def test_a_plain_run_is_due_from_the_last_done_interval_minus_lookback():
    now = D(2026, 3, 10, 14, 5)
    assert intervals.due(Cfg(), [], now) == (D(2026, 3, 9), D(2026, 3, 10))  # no start: the last complete day
    assert intervals.due(Cfg(start="2026-03-01"), [], now) == (D(2026, 3, 1), D(2026, 3, 10))
    done = [(D(2026, 3, 1), D(2026, 3, 8))]
    assert intervals.due(Cfg(start="2026-03-01", lookback=2), done, now) == (D(2026, 3, 6), D(2026, 3, 10))
    assert intervals.due(Cfg(start="2026-03-01", lookback=30), done, now) == (D(2026, 3, 1), D(2026, 3, 10))
    assert intervals.due(Cfg(), [(D(2026, 3, 1), D(2026, 3, 10))], now) is None  # today is not complete
    assert intervals.due(Cfg(batch="hour"), [(D(2026, 3, 10), D(2026, 3, 10, 12))], now) == \
        (D(2026, 3, 10, 12), D(2026, 3, 10, 14))


@pytest.fixture
def chain(make_project):
    """hourly upstream -> daily downstream, both incremental_by_time, and a full_refresh beside them."""
    head = "-- @merge_strategy: incremental_by_time\n-- @time_column: ts\n-- @batch: {batch}\n"
    root = make_project({
        "demo/pipelines/bronze/raw/pipeline.sql": "-- @merge_strategy: full_refresh\nSELECT 1 AS id\n",
        "demo/pipelines/silver/hourly/pipeline.sql": head.format(batch="hour")
        + "SELECT * FROM {{ ref('bronze.raw') }} WHERE ts >= '{{ start }}' AND ts < '{{ end }}'\n",
        "demo/pipelines/gold/daily/pipeline.sql": head.format(batch="day")
        + "SELECT * FROM {{ ref('silver.hourly') }} WHERE ts >= '{{ start }}' AND ts < '{{ end }}'\n",
    })
    return compile_project(root, load_settings(root))


def test_ten_thousand_hourly_intervals_plan_in_well_under_a_second_without_an_object_each(chain):
    keys = chain.select(["silver.hourly"])
    began = time.perf_counter()
    plan = backfill.plan(chain, keys, D(2026, 1, 1), intervals.step(D(2026, 1, 1), "hour", 10_000))
    took = time.perf_counter() - began
    assert plan.todo == 10_000 and took < 0.2, took
    # walking it holds one interval at a time: memory does not grow with the plan
    tracemalloc.start()
    try:
        count = sum(1 for _ in plan.items())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 10_000 and peak < 200_000, peak
    # a resume of a range whose first half is done plans the other half
    resumed = backfill.plan(chain, keys, D(2026, 1, 1), D(2026, 1, 3),
                            done_of=lambda key: [(D(2026, 1, 1), D(2026, 1, 2))])
    assert resumed.todo == 24 and resumed.targets[0].total == 48


def test_downstream_intervals_come_after_the_upstream_intervals_they_read(chain):
    keys = chain.select(["silver.hourly+"])
    plan = backfill.plan(chain, keys, D(2026, 1, 1), D(2026, 1, 3))
    items = list(plan.items())
    assert len(items) == 48 + 2
    daily = [i for i, (key, _) in enumerate(items) if key == "demo.gold.daily"]
    assert daily == [24, 49]  # each day right after its 24th hour
    assert items[24] == ("demo.gold.daily", (D(2026, 1, 1), D(2026, 1, 2)))
    assert plan.upstream["demo.gold.daily"] == {"demo.silver.hourly"}


def test_bad_ranges_and_selections_are_coded(chain):
    with pytest.raises(RatuiError) as caught:
        backfill.parse_range("2026-04-01", "2026-01-01")
    assert caught.value.code == "RAT-BKF-002"
    with pytest.raises(RatuiError) as caught:
        backfill.parse_range("yesterday", "2026-01-01")
    assert caught.value.code == "RAT-BKF-001"
    with pytest.raises(RatuiError) as caught:
        backfill.plan(chain, chain.select(["bronze.raw"]), D(2026, 1, 1), D(2026, 2, 1))
    assert caught.value.code == "RAT-BKF-003"
