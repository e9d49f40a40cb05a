"""incremental_by_time and backfills on real Spark and Iceberg: a generated fact table filled interval by interval
equals a full rebuild row for row; an interval run twice changes nothing; rows outside the interval are refused;
a failed interval is resumed alone; an atomic backfill lands all or nothing."""

from __future__ import annotations

import datetime

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.project import intervals

# 90 days of events: 4 a day (every 6 hours), event 5 of each day's first hour carries a negative amount only
# when the bronze pipeline's @description says so (the faulty day)
EVENTS = """\
-- @merge_strategy: full_refresh
SELECT id AS event_id,
       TIMESTAMP '2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, id * 6, 0, 0) AS event_ts,
       CASE WHEN id = {bad} THEN -1.0 ELSE CAST(id % 97 AS DOUBLE) END AS amount
FROM range(0, 360)
"""

FACTS = """\
-- @merge_strategy: incremental_by_time
-- @time_column: event_ts
-- @batch: day
-- @start: 2026-01-01
SELECT event_id, event_ts, assert_true(amount >= 0) IS NULL AND true AS checked, amount * 2 AS amount2
FROM {{ ref('bronze.events') }}
WHERE event_ts >= TIMESTAMP '{{ start }}' AND event_ts < TIMESTAMP '{{ end }}'
"""

REBUILT = """\
-- @merge_strategy: full_refresh
SELECT event_id, event_ts, true AS checked, amount * 2 AS amount2 FROM {{ ref('bronze.events') }}
"""


def _project(make_project, bad: int = -1, facts: str = FACTS):
    return make_project({
        "demo/pipelines/bronze/events/pipeline.sql": EVENTS.format(bad=bad),
        "demo/pipelines/silver/facts/pipeline.sql": facts,
        "demo/pipelines/silver/rebuilt/pipeline.sql": REBUILT,
    })


def _keys(engine: Engine, *names: str) -> list[str]:
    return engine.compile().select(list(names))


def _rows(engine: Engine, sql: str) -> list[tuple]:
    return [tuple(r) for r in engine.query(sql, limit=100_000)[1]]


def _difference(engine: Engine) -> list[tuple]:
    return _rows(engine, "(SELECT * FROM silver.facts EXCEPT ALL SELECT * FROM silver.rebuilt) UNION ALL "
                         "(SELECT * FROM silver.rebuilt EXCEPT ALL SELECT * FROM silver.facts)")


def _done(engine: Engine) -> list[tuple[str, str]]:
    table = engine.state.catalog.load_table("main", "demo.silver.facts")
    return [(intervals.iso(a), intervals.iso(b)) for a, b in intervals.done_of(table)]


def test_a_90_day_backfill_equals_a_full_rebuild_row_for_row(make_project, spark):
    root = _project(make_project)
    engine = Engine.open(root)
    try:
        first = engine.run(_keys(engine, "bronze.events", "silver.rebuilt"))
        assert [r.status for r in first] == ["success", "success"]
        seen = []
        backfill = engine.backfill(_keys(engine, "silver.facts"), "2026-01-01", "2026-04-01",
                                   on_interval=lambda key, iv, result, p: seen.append((iv, result.status)))
        progress = backfill.run()
        assert (progress.done, progress.failed, progress.pending) == (90, 0, 0)
        assert progress.rows == 360
        assert [iv for iv, _ in seen] == sorted(iv for iv, _ in seen)  # in order
        assert _difference(engine) == []
        assert _rows(engine, "SELECT count(*) FROM silver.facts") == [(360,)]
        assert _done(engine) == [("2026-01-01T00:00:00", "2026-04-01T00:00:00")]
        # an interval again: the same table (idempotent), and the record unchanged
        again = engine.backfill(_keys(engine, "silver.facts"), "2026-02-10", "2026-02-11").run()
        assert (again.done, again.rows) == (1, 4)
        assert _difference(engine) == []
        # a resume of the range finds nothing to do
        assert engine.backfill(_keys(engine, "silver.facts"), "2026-01-01", "2026-04-01", resume=True).plan.todo == 0
    finally:
        engine.close()


def test_a_failed_interval_is_listed_and_a_resume_runs_exactly_it(make_project, spark):
    # event 161 is on 2026-02-10 (161 * 6 h = 40 days + 6 h): that day's interval fails its assert_true
    root = _project(make_project, bad=161)
    engine = Engine.open(root)
    try:
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        progress = engine.backfill(_keys(engine, "silver.facts"), "2026-02-08", "2026-02-13").run()
        assert (progress.done, progress.failed, progress.pending) == (4, 1, 0)
        [failure] = progress.failures
        assert (failure["start"], failure["end"]) == ("2026-02-10T00:00:00", "2026-02-11T00:00:00")
        assert failure["error"]["code"].startswith("RAT-SQL")
        assert _done(engine) == [("2026-02-08T00:00:00", "2026-02-10T00:00:00"),
                                 ("2026-02-11T00:00:00", "2026-02-13T00:00:00")]
        # the data fixed, a resume runs the failed interval and nothing else
        _project(make_project, bad=-1)
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        ran = []
        resumed = engine.backfill(_keys(engine, "silver.facts"), "2026-02-08", "2026-02-13", resume=True,
                                  on_interval=lambda key, iv, result, p: ran.append(iv))
        assert resumed.plan.todo == 1
        assert (resumed.run().done, [(intervals.iso(a), intervals.iso(b)) for a, b in ran]) == \
            (1, [("2026-02-10T00:00:00", "2026-02-11T00:00:00")])
        assert _done(engine) == [("2026-02-08T00:00:00", "2026-02-13T00:00:00")]
        assert _rows(engine, "SELECT count(*) FROM silver.facts") == [(20,)]
    finally:
        engine.close()


def test_an_atomic_backfill_lands_all_or_nothing(make_project, spark):
    root = _project(make_project, bad=161)
    engine = Engine.open(root)
    try:
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        failed = engine.backfill(_keys(engine, "silver.facts"), "2026-02-08", "2026-02-12", atomic=True)
        progress = failed.run()
        assert (progress.done, progress.failed) == (3, 1)
        assert failed.publish is not None and not failed.publish.merged
        assert not engine.state.catalog.table_exists("main", "demo.silver.facts")  # nothing landed
        _project(make_project, bad=-1)
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        ok = engine.backfill(_keys(engine, "silver.facts"), "2026-02-08", "2026-02-12", atomic=True)
        assert ok.run().done == 4 and ok.publish is not None and ok.publish.merged
        assert _rows(engine, "SELECT count(*) FROM silver.facts") == [(16,)]
        assert _done(engine) == [("2026-02-08T00:00:00", "2026-02-12T00:00:00")]
    finally:
        engine.close()


def test_rows_outside_the_interval_are_refused_and_main_is_unchanged(make_project, spark):
    leaky = FACTS.replace("WHERE event_ts >= TIMESTAMP '{{ start }}' AND", "WHERE")  # one bound forgotten
    root = _project(make_project, facts=leaky)
    engine = Engine.open(root)
    try:
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        progress = engine.backfill(_keys(engine, "silver.facts"), "2026-01-03", "2026-01-04").run()
        assert progress.failed == 1
        error = progress.failures[0]["error"]
        assert error["code"] == "RAT-WRT-011", error["message"]
        assert "demo.silver.facts" in error["message"] and "8 of 12 result row(s)" in error["message"]
        assert not engine.state.catalog.table_exists("main", "demo.silver.facts")
    finally:
        engine.close()


def test_a_plain_run_fills_the_intervals_due_since_the_last_one(make_project, spark):
    root = _project(make_project)
    engine = Engine.open(root)
    try:
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        assert engine.backfill(_keys(engine, "silver.facts"), "2026-01-01", "2026-03-01").run().done == 59
        [result] = engine.run(_keys(engine, "silver.facts"))
        assert result.status == "success"
        today = intervals.floor(intervals.utc_now(), "day")
        assert _done(engine) == [("2026-01-01T00:00:00", intervals.iso(today))]
        assert _rows(engine, "SELECT count(*) FROM silver.facts") == [(360,)]
        [again] = engine.run(_keys(engine, "silver.facts"))  # nothing due: skipped as unchanged
        assert again.status == "skipped"
        # --full-refresh rebuilds [start, now) in one run and records that range alone
        [rebuilt] = engine.run(_keys(engine, "silver.facts"), full_refresh=True)
        assert rebuilt.status == "success" and rebuilt.rows_written == 360
        assert _done(engine) == [("2026-01-01T00:00:00", intervals.iso(today))]
        assert _rows(engine, "SELECT count(*) FROM silver.facts") == [(360,)]
    finally:
        engine.close()


def test_a_backfill_refuses_bad_ranges_and_selections(make_project, spark):
    root = _project(make_project)
    engine = Engine.open(root)
    try:
        for start, end, code in (("2026-04-01", "2026-01-01", "RAT-BKF-002"), ("2026-13-01", "2026-04-01",
                                                                               "RAT-BKF-001")):
            with pytest.raises(RatuiError) as caught:
                engine.backfill(_keys(engine, "silver.facts"), start, end)
            assert caught.value.code == code
        with pytest.raises(RatuiError) as caught:
            engine.backfill(_keys(engine, "bronze.events"), "2026-01-01", "2026-04-01")
        assert caught.value.code == "RAT-BKF-003"
    finally:
        engine.close()


TOTALS = """\
-- @merge_strategy: incremental_by_time
-- @time_column: day
-- @batch: day
SELECT CAST(date_trunc('DAY', event_ts) AS TIMESTAMP) AS day, sum(amount2) AS total
FROM {{ ref('silver.facts') }}
WHERE event_ts >= TIMESTAMP '{{ start }}' AND event_ts < TIMESTAMP '{{ end }}'
GROUP BY 1
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_failed_upstream_interval_skips_only_the_downstream_intervals_that_read_it(make_project, spark, threads):
    root = _project(make_project, bad=161)
    make_project({"demo/pipelines/gold/totals/pipeline.sql": TOTALS})
    engine = Engine.open(root)
    try:
        assert engine.run(_keys(engine, "bronze.events"))[0].status == "success"
        order = []
        backfill = engine.backfill(_keys(engine, "silver.facts+"), "2026-02-09", "2026-02-12", threads=threads,
                                   on_interval=lambda key, iv, result, p: order.append(
                                       (key.split(".")[-1], intervals.iso(iv[0])[:10], result.status)))
        progress = backfill.run()
        expected = [("facts", "2026-02-09", "success"), ("totals", "2026-02-09", "success"),
                    ("facts", "2026-02-10", "failed"), ("totals", "2026-02-10", "skipped"),
                    ("facts", "2026-02-11", "success"), ("totals", "2026-02-11", "success")]
        # with two threads a pipeline's next interval may end before its downstream's current one: each pipeline's
        # own intervals stay in order, and a downstream interval always after the upstream one it reads
        assert sorted(order) == sorted(expected)
        for name in ("facts", "totals"):
            assert [o for o in order if o[0] == name] == [o for o in expected if o[0] == name]
        for day in ("2026-02-09", "2026-02-10", "2026-02-11"):
            assert order.index(("facts", day, "success" if day != "2026-02-10" else "failed")) < \
                order.index(("totals", day, "success" if day != "2026-02-10" else "skipped"))
        assert (progress.done, progress.failed, progress.skipped, progress.pending) == (4, 1, 1, 0)
        assert _rows(engine, "SELECT CAST(day AS DATE) AS d FROM gold.totals ORDER BY d") == [
            (datetime.date(2026, 2, 9),), (datetime.date(2026, 2, 11),)]
    finally:
        engine.close()
