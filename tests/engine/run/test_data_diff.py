"""A run's data diff (run/data_diff.py) on real Spark and real Iceberg tables, checked against a reference computed
here in plain Python from both sides' rows (read with PyIceberg, never from ratui's diff), and its gates failing a
run before its merge."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest

from ratui.engine.run import data_diff
from ratui.engine.facade.engine import Engine

KEY = "demo.silver.people"
PATH = "demo/pipelines/silver/people/pipeline.sql"

ROWS_1 = [(1, "'a@x'", "10.50"), (2, "'b@x'", "20.00"), (3, "NULL", "5.25"), (4, "'d@x'", "1.00"),
          (5, "'e@x'", "2.00")]
# 1 unchanged, 2 changed (amount), 3 changed (email set), 4 removed, 5 changed (email NULLed), 6 and 7 added
ROWS_2 = [(1, "'a@x'", "10.50"), (2, "'b@x'", "21.00"), (3, "'c@x'", "5.25"), (5, "NULL", "2.00"),
          (6, "'f@x'", "7.00"), (7, "NULL", "NULL")]


def sql(rows, header: str = "") -> str:
    values = ", ".join(f"({i}, {e}, CAST({a} AS DECIMAL(12,2)))" for i, e, a in rows)
    return (f"-- @merge_strategy: full_refresh\n{header}"
            f"SELECT CAST(id AS BIGINT) AS id, CAST(email AS STRING) AS email, amount "
            f"FROM VALUES {values} AS t(id, email, amount)\n")


def main_rows(engine) -> list[dict]:
    if not engine.state.catalog.table_exists("main", KEY):
        return []
    return engine.state.catalog.load_table("main", KEY).scan().to_arrow().to_pylist()


def reference(before: list[dict], after: list[dict], key: str | None) -> dict:
    """The diff counted by hand."""
    out: dict = {"rows_before": len(before), "rows_after": len(after), "columns": {}}
    if key:
        b, a = {r[key]: r for r in before}, {r[key]: r for r in after}
        out["added"] = sorted(k for k in a if k not in b)
        out["removed"] = sorted(k for k in b if k not in a)
        out["changed"] = sorted(k for k in a if k in b and a[k] != b[k])
    else:
        cb = Counter(tuple(sorted(r.items())) for r in before)
        ca = Counter(tuple(sorted(r.items())) for r in after)
        out["added"] = sum((ca - cb).values())
        out["removed"] = sum((cb - ca).values())
    for name in (after or before)[0]:
        for side, rows in (("before", before), ("after", after)):
            values = [r[name] for r in rows]
            present = [v for v in values if v is not None]
            out["columns"][(name, side)] = (values.count(None), len(set(present)),
                                            sum(present) if present and isinstance(present[0], (int, Decimal))
                                            else None)
    return out


def check(diff: dict, ref: dict, keyed: bool, method: str = "in_process") -> None:
    assert diff["method"] == method
    assert (diff["rows_before"], diff["rows_after"]) == (ref["rows_before"], ref["rows_after"])
    if keyed:
        assert (diff["added"], diff["removed"], diff["changed"]) == \
            (len(ref["added"]), len(ref["removed"]), len(ref["changed"]))
        for kind in ("added", "removed", "changed"):
            assert [s["id"] for s in diff["samples"][kind]] == ref[kind][:10]
    else:
        assert (diff["added"], diff["removed"], diff["changed"]) == (ref["added"], ref["removed"], None)
    for col in diff["columns"]:
        for side in ("before", "after"):
            nulls, distinct, total = ref["columns"][(col["name"], side)]
            assert col[f"nulls_{side}"] == nulls, (col["name"], side)
            assert col[f"distinct_{side}"] == distinct, (col["name"], side)
            got = col[f"sum_{side}"]
            assert (Decimal(str(got)) if got is not None else None) == total, (col["name"], side)


@pytest.fixture
def project(make_project, spark):
    return make_project({PATH: sql(ROWS_1, "-- @unique_key: id\n")})


def test_keyed_diff_matches_python_and_is_stored(project, spark):
    engine = Engine.open(project)
    try:
        [first] = engine.run([KEY])
        assert first.status == "success", first.error
        assert first.diff["new_table"] and first.diff["added"] == 5 and first.diff["rows_before"] == 0
        before = main_rows(engine)
        fork = engine.state.catalog.table_pointers("main")[KEY]
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n"))
        [second] = engine.run([KEY])
        assert second.status == "success", second.error
        after = main_rows(engine)
        ref = reference(before, after, "id")
        # computed again outside the run, as one Spark job (a run's diff of a small table is computed in process)
        sc = spark.sparkContext
        sc.setJobGroup("diff-jobs", "count the diff's jobs")
        try:
            again = data_diff.compute(spark, KEY, engine.state.catalog.static_table(fork),
                                      engine.state.catalog.load_table("main", KEY), ("id",), 1000)
            assert len(sc.statusTracker().getJobIdsForGroup("diff-jobs")) == 1
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert again.method == "spark"
        assert again.to_dict() == {**second.diff, "gate": {}, "method": "spark"}
        check(again.to_dict(), reference(before, main_rows(engine), "id"), keyed=True, method="spark")
        assert (ref["added"], ref["removed"], ref["changed"]) == ([6, 7], [4], [2, 3, 5])  # the fixture's intent
        stored = engine.state.history.get_run(second.run_id)["diff"]
        assert stored == second.diff
        check(stored, ref, keyed=True)
        assert stored["samples"]["removed"] == [{"id": 4}]
    finally:
        engine.close()


def test_unkeyed_diff_compares_rows_as_multisets(make_project, spark):
    rows_1 = ROWS_1 + [(1, "'a@x'", "10.50")]  # a duplicate row
    root = make_project({PATH: sql(rows_1)})
    engine = Engine.open(root)
    try:
        assert engine.run([KEY])[0].status == "success"
        before = main_rows(engine)
        (root / PATH).write_text(sql(ROWS_2 + [(6, "'f@x'", "7.00")]))
        [second] = engine.run([KEY])
        assert second.status == "success", second.error
        ref = reference(before, main_rows(engine), None)
        check(second.diff, ref, keyed=False)
        assert len(second.diff["samples"]["added"]) == ref["added"] - 1  # the two (6, f@x) rows are one sample
        assert "changed" not in second.diff["samples"]
    finally:
        engine.close()


MIXED = "demo/pipelines/silver/mixed/pipeline.sql"


def mixed_sql(rows: str, extra: str = "") -> str:
    return ("-- @merge_strategy: full_refresh\n"
            "SELECT CAST(id AS BIGINT) AS id, CAST(name AS STRING) AS name, CAST(score AS DOUBLE) AS score, "
            f"CAST(day AS DATE) AS day, CAST(flag AS BOOLEAN) AS flag{extra} FROM VALUES {rows} "
            f"AS t(id, name, score, day, flag{', note' if extra else ''})\n")


@pytest.mark.parametrize("key", ["id", None])
def test_the_in_process_diff_is_the_spark_jobs(make_project, spark, key):
    """NaN equal to NaN (as Spark's <=> and GROUP BY have it), a NULL key matching a NULL key, a duplicate row, a
    column added: the same figures and samples both ways."""
    header = f"-- @unique_key: {key}\n" if key else ""
    first = ("(1, 'a', 1.5, '2026-01-01', true), (2, 'b', double('NaN'), '2026-01-02', false), "
             "(NULL, 'n', NULL, NULL, NULL), (4, 'd', 4.0, '2026-01-04', true), (5, NULL, 5.0, '2026-01-05', true)")
    second = ("(1, 'a', 1.5, '2026-01-01', true, 'x'), (2, 'b', double('NaN'), '2026-01-02', true, NULL), "
              "(NULL, 'n', double('NaN'), NULL, NULL, NULL), (5, NULL, 5.0, '2026-01-05', true, 'y'), "
              "(6, 'f', double('NaN'), '2026-02-06', false, 'z'), (7, NULL, NULL, NULL, NULL, NULL)")
    if not key:
        first += ", (1, 'a', 1.5, '2026-01-01', true)"
    root = make_project({MIXED: header + mixed_sql(first)})
    engine = Engine.open(root)
    try:
        [made] = engine.run(["demo.silver.mixed"])
        assert made.status == "success", made.error
        fork = engine.state.catalog.table_pointers("main")["demo.silver.mixed"]
        (root / MIXED).write_text(header + mixed_sql(second, ", CAST(note AS STRING) AS note"))
        [run] = engine.run(["demo.silver.mixed"])
        assert run.status == "success", run.error
        assert run.diff["method"] == "in_process"
        before = engine.state.catalog.static_table(fork)
        after = engine.state.catalog.load_table("main", "demo.silver.mixed")
        keys = (key,) if key else ()
        by_spark = data_diff.compute(spark, "demo.silver.mixed", before, after, keys, 1000).to_dict()
        in_process = data_diff.compute(spark, "demo.silver.mixed", before, after, keys, 1000, 1000).to_dict()
        assert by_spark["method"] == "spark" and in_process["method"] == "in_process"
        # as JSON (how both are stored): NaN, the score's sum, is not equal to itself
        assert json.dumps({**in_process, "method": "spark"}, sort_keys=True) == json.dumps(by_spark, sort_keys=True)
        assert in_process["schema_changes"] == ["added column note string"]
        if key:  # 2 changed (flag), the NULL key changed (score NULL -> NaN), 4 removed, 6 and 7 added
            assert (in_process["added"], in_process["removed"], in_process["changed"]) == (2, 1, 2)
        else:  # every row gains a column: all removed and added, the duplicate counted twice
            assert (in_process["added"], in_process["removed"]) == (6, 6)
        score = next(c for c in in_process["columns"] if c["name"] == "score")
        assert (score["nulls_after"], score["distinct_after"]) == (1, 3)  # NaN is one distinct value
    finally:
        engine.close()


def test_gates_fail_the_run_before_its_merge(project):
    # a run that creates the table has nothing to compare with: its gates are not applied
    (project / PATH).write_text(sql(ROWS_1, "-- @unique_key: id\n-- @max_row_change: 1\n"))
    engine = Engine.open(project)
    try:
        [first] = engine.run([KEY])
        assert first.status == "success", first.error
        assert first.diff["gate"]["passed"][0].startswith("gates not applied: a new table")
        pointers = engine.state.catalog.table_pointers("main")
        before = main_rows(engine)
        # 2 added + 1 removed + 3 changed = 6 of 5 rows: 120%
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n-- @max_row_change: 100%\n"))
        [run] = engine.run([KEY])
        assert run.status == "failed" and run.error["code"] == "RAT-RUN-009", run.error
        assert run.error["line"] == 3 and run.error["file"].endswith("pipeline.sql")
        assert "max_row_change 100%" in run.error["message"]
        assert engine.state.catalog.table_pointers("main") == pointers and main_rows(engine) == before
        assert not [r for r in engine.state.catalog.list_refs() if r.name.startswith("run-")]
        record = engine.state.history.get_run(run.run_id)
        assert record["diff"]["gate"]["failed"] and record["error_code"] == "RAT-RUN-009"

        # email's NULL share: 1 of 5 (20%) -> 2 of 6 (33.3%): a rise of 13.3 points
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n-- @max_null_increase: email 10%\n"))
        [run] = engine.run([KEY])
        assert run.error and run.error["code"] == "RAT-RUN-009" and "email" in run.error["message"], run.error
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n-- @max_null_increase: emial 10%\n"))
        [run] = engine.run([KEY])
        assert run.error and run.error["code"] == "RAT-CFG-010" and "email" in run.error["hint"], run.error
        assert engine.state.catalog.table_pointers("main") == pointers

        # limits the change keeps to: it merges, the verdicts recorded
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n-- @max_row_change: 150%\n"
                                               "-- @max_null_increase: email 14%\n-- @max_rows_removed: 1\n"))
        [run] = engine.run([KEY])
        assert run.status == "success", run.error
        assert len(run.diff["gate"]["passed"]) == 3 and not run.diff["gate"]["failed"]
    finally:
        engine.close()


def test_a_run_failing_its_quality_tests_keeps_the_diff_of_what_it_would_have_changed(project):
    engine = Engine.open(project)
    try:
        assert engine.run([KEY])[0].status == "success"
        before, pointers = main_rows(engine), engine.state.catalog.table_pointers("main")
        tests = project / PATH.replace("pipeline.sql", "tests/quality")
        tests.mkdir(parents=True)
        (tests / "no_null_email.sql").write_text("SELECT id FROM {{ this }} WHERE email IS NULL\n")
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n-- @max_row_change: 1\n"))
        [run] = engine.run([KEY])
        assert run.status == "failed" and run.error["code"] == "RAT-RUN-003", run.error  # the tests, not the gate
        assert engine.state.catalog.table_pointers("main") == pointers and main_rows(engine) == before
        stored = engine.state.history.get_run(run.run_id)["diff"]
        assert stored == run.diff and stored["gate"] == {}  # kept, not gated: the run failed all the same
        assert (stored["added"], stored["removed"], stored["changed"]) == (2, 1, 3)  # 6, 7 | 4 | 2, 3, 5
        assert stored["samples"]["added"] == [{"id": 6}, {"id": 7}]
    finally:
        engine.close()


def test_above_the_threshold_the_diff_comes_from_file_statistics(project):
    settings = (project / "ratui.yaml").read_text()
    (project / "ratui.yaml").write_text(settings + "diff:\n  max_rows: 3\n")
    engine = Engine.open(project)
    try:
        assert engine.run([KEY])[0].status == "success"
        before = main_rows(engine)
        (project / PATH).write_text(sql(ROWS_2, "-- @unique_key: id\n"))
        [run] = engine.run([KEY])
        assert run.status == "success", run.error
        after = main_rows(engine)
        diff = run.diff
        assert diff["method"] == "file_stats"
        assert (diff["rows_before"], diff["rows_after"]) == (len(before), len(after))
        # a full refresh replaces every file: all rows count as removed and added; nothing else is known
        assert (diff["added"], diff["removed"], diff["changed"]) == (len(after), len(before), None)
        for col in diff["columns"]:
            assert col["nulls_before"] == sum(1 for r in before if r[col["name"]] is None)
            assert col["nulls_after"] == sum(1 for r in after if r[col["name"]] is None)
            assert col["distinct_after"] is None and col["sum_after"] is None
        ids = diff["columns"][0]
        assert (ids["min_after"], ids["max_after"]) == (min(r["id"] for r in after), max(r["id"] for r in after))
    finally:
        engine.close()
