"""Merging by append on real Spark and Iceberg: two branches that both only appended to a table merge cleanly, on
both catalogs; the table's quality tests run again on the combined rows first; overwrites, deletes and schema
changes stay conflicts (RAT-CAT-003); a merge by append equals running both branches' runs serially on main."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratui.engine.errors import RatuiError
from ratui.engine.facade.engine import Engine
from ratui.engine.state.catalog import append_merge
from tests.engine.ops.test_branches import catalog, metadata_bytes  # noqa: F401 - the fixture, both backends

EVENTS = "demo.bronze.events"
KINDS = "demo.silver.kinds"
NO_BAD = "SELECT * FROM {{ this }} WHERE kind = 'bad'\n"


def pipeline(values: list[tuple[int, str]], *, partitioned: bool = False, strategy: str = "append_only") -> str:
    """An append-only pipeline adding exactly `values` (its SQL changes with them, so each version runs once)."""
    rows = ", ".join(f"({i}, '{k}')" for i, k in values)
    return (f"-- @merge_strategy: {strategy}\n" + ("-- @partition_by: kind\n" if partitioned else "")
            + f"SELECT id, kind FROM VALUES {rows} AS t(id, kind)\n")


def set_events(root: Path, values: list[tuple[int, str]], **kw) -> None:
    (root / "demo/pipelines/bronze/events/pipeline.sql").write_text(pipeline(values, **kw))


def run(engine, ref="main", *selectors):
    results = engine.run(engine.compile().select(list(selectors) or ["bronze.events"]), ref=ref)
    assert [r.status for r in results] == ["success"] * len(results), [(r.pipeline, r.error) for r in results]
    return results


def rows(engine, sql="SELECT id, kind FROM bronze.events", ref="main"):
    _columns, data, _ = engine.query(sql, ref=ref)
    return sorted(tuple(r) for r in data)


def new_project(make_project, name="proj", *, partitioned=False, tests=True):
    files = {"demo/pipelines/bronze/events/pipeline.sql": pipeline([(1, "a"), (2, "b")], partitioned=partitioned)}
    if tests:
        files["demo/pipelines/bronze/events/tests/quality/no_bad.sql"] = NO_BAD
    return make_project(files, name=name)


@pytest.fixture
def project(make_project, spark, catalog):  # noqa: F811 - the fixture imported from test_branches
    return new_project(make_project)


def two_appending_branches(engine, root, *, partitioned=False):
    """main: rows 1, 2; dev1 appends 10 (and later 11), dev2 appends 20, main appends 3 meanwhile."""
    run(engine)
    engine.create_branch("dev1")
    engine.create_branch("dev2")
    set_events(root, [(10, "a")], partitioned=partitioned)
    run(engine, "dev1")
    set_events(root, [(11, "c")], partitioned=partitioned)
    run(engine, "dev1")  # the branch appended twice
    set_events(root, [(20, "b")], partitioned=partitioned)
    run(engine, "dev2")
    set_events(root, [(3, "a")], partitioned=partitioned)
    run(engine)


def test_two_branches_that_appended_merge_by_append_on_both_catalogs(project):
    engine = Engine.open(project)
    two_appending_branches(engine, project)

    dry = engine.merge("dev1", dry_run=True)
    assert (dry.by_append, dry.conflicts) == ([EVENTS], [])
    first = engine.merge("dev1")
    assert first.by_append == [EVENTS] and first.tables == [EVENTS] and first.commit is not None
    assert rows(engine) == [(1, "a"), (2, "b"), (3, "a"), (10, "a"), (11, "c")]

    # Nessie alone refuses this second merge: both merges touched the same table
    dry = engine.merge("dev2", dry_run=True)
    assert (dry.by_append, dry.conflicts) == ([EVENTS], [])
    second = engine.merge("dev2")
    assert second.by_append == [EVENTS]
    assert rows(engine) == [(1, "a"), (2, "b"), (3, "a"), (10, "a"), (11, "c"), (20, "b")]

    # the same data files as on the branch (no copy), added by one append snapshot naming the merge
    table = engine.load_table("main", EVENTS)
    snapshot = table.current_snapshot()
    props = snapshot.summary.additional_properties
    assert snapshot.summary.operation.value == "append"
    assert props[append_merge.MERGE_PROPERTY] == "append" and props[append_merge.FROM_PROPERTY] == "dev2"
    dev2_files = {t.file.file_path for t in engine.load_table("dev2", EVENTS).scan().plan_files()}
    main_files = {t.file.file_path for t in table.scan().plan_files()}
    assert dev2_files <= main_files
    # the re-committed entries: dev2's files with their own stats, under the merge snapshot's sequence number
    branch_files = {t.file.file_path: t.file for t in engine.load_table("dev2", EVENTS).scan().plan_files()}
    added = [e for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)
             if e.snapshot_id == snapshot.snapshot_id]
    assert [e.data_file.file_path for e in added] == sorted(dev2_files - {
        t.file.file_path for t in engine.load_table("dev1", EVENTS).scan().plan_files()})
    for entry in added:
        assert entry.sequence_number == snapshot.sequence_number
        source = branch_files[entry.data_file.file_path]
        assert (entry.data_file.record_count, entry.data_file.file_size_in_bytes) == (
            source.record_count, source.file_size_in_bytes)
    dev2_runs = [r for r in engine.runs(ref="dev2") if r["pipeline"] == EVENTS]
    assert props[append_merge.RUNS_PROPERTY] == dev2_runs[0]["id"]

    # the log says what happened; no temporary branch is left behind
    entry = engine.log("main", limit=1)[0]
    assert entry.kind == "merge" and EVENTS in [t["table"] for t in entry.tables]
    assert entry.message.endswith(f"(by append: {EVENTS})")
    assert {r.name for r in engine.refs()} == {"main", "dev1", "dev2"}

    # merging dev2 again adds nothing twice
    again = engine.merge("dev2")
    assert again.conflicts == []
    assert rows(engine) == [(1, "a"), (2, "b"), (3, "a"), (10, "a"), (11, "c"), (20, "b")]


def test_a_failing_quality_test_on_the_combined_rows_leaves_main_unchanged(project):
    engine = Engine.open(project)
    run(engine)
    engine.create_branch("dev")
    # each side alone passes no_bad ... until the test looks at both sides' rows together
    (project / "demo/pipelines/bronze/events/tests/quality/no_bad.sql").write_text(
        "SELECT kind FROM {{ this }} WHERE kind IN ('x', 'y') GROUP BY kind HAVING count(*) > 1\n")
    set_events(project, [(10, "x")])
    run(engine, "dev")
    set_events(project, [(3, "x")])
    run(engine)
    before = metadata_bytes(engine)
    assert engine.merge("dev", dry_run=True).by_append == [EVENTS]
    with pytest.raises(RatuiError) as err:
        engine.merge("dev")
    assert err.value.code == "RAT-CAT-013" and err.value.details["tables"] == [EVENTS]
    assert "no_bad" in err.value.message
    assert metadata_bytes(engine) == before
    assert rows(engine) == [(1, "a"), (2, "b"), (3, "x")]
    assert {r.name for r in engine.refs()} == {"main", "dev"}


def test_an_atomic_publish_merges_by_append_when_main_appended_meanwhile(make_project, spark):
    root = new_project(make_project)
    engine = Engine.open(root)
    try:
        run(engine)

        def publish(values, main_values):
            """An atomic publish of bronze.events adding `values`, while a run on main adds `main_values` after
            the publish branch forked."""
            set_events(root, values)  # (what the invocation compiles and decides on)
            invocation = engine.invocation(engine.compile().select(["bronze.events"]), trigger="cli", atomic=True)
            set_events(root, main_values)
            run(engine)
            set_events(root, values)
            assert [r.status for r in invocation.run()] == ["success"]
            return invocation.publish

        published = publish([(10, "a")], [(3, "b")])
        assert published.merged and published.tables == [EVENTS], published
        assert rows(engine) == [(1, "a"), (2, "b"), (3, "b"), (10, "a")]
        assert engine.log("main", limit=1)[0].kind == "publish"
        assert engine.state.catalog.log("main", limit=1)[0].meta.get("by_append") == [EVENTS]

        # the combined rows fail the table's test (each side alone passes): nothing lands, the branch is kept
        (root / "demo/pipelines/bronze/events/tests/quality/no_bad.sql").write_text(
            "SELECT kind FROM {{ this }} WHERE kind IN ('x', 'y') GROUP BY kind HAVING count(*) > 1\n")
        published = publish([(11, "x")], [(4, "x")])
        after_main_run = rows(engine)
        assert not published.merged and published.error["code"] == "RAT-CAT-013", published
        assert (4, "x") in after_main_run and (11, "x") not in after_main_run
        assert published.branch in {r.name for r in engine.refs()}
    finally:
        engine.close()


@pytest.mark.parametrize("change", ["overwrite", "schema", "full_refresh_branch"])
def test_an_overwrite_or_schema_change_on_either_side_is_still_a_conflict(project, change):
    engine = Engine.open(project)
    run(engine)
    engine.create_branch("dev")
    set_events(project, [(10, "a")])
    run(engine, "dev")
    if change == "overwrite":  # main rebuilt the table: an overwrite
        set_events(project, [(3, "a")], strategy="full_refresh")
        run(engine)
        reason = "overwrite"
    elif change == "schema":  # main added a column
        (project / "demo/pipelines/bronze/events/pipeline.sql").write_text(
            "-- @merge_strategy: append_only\nSELECT 3 AS id, 'a' AS kind, 1 AS extra\n")
        run(engine)
        reason = "schema"
    else:  # the branch rebuilt it, main appended
        set_events(project, [(3, "a")])
        run(engine)
        engine.create_branch("dev_b")
        set_events(project, [(30, "a")], strategy="full_refresh")
        run(engine, "dev_b")
        reason = "overwrite"
    ref = "dev_b" if change == "full_refresh_branch" else "dev"
    before = metadata_bytes(engine)
    if change == "full_refresh_branch":  # dev_b forked after main's append: append on main after it
        set_events(project, [(4, "a")])
        run(engine)
        before = metadata_bytes(engine)
    dry = engine.merge(ref, dry_run=True)
    assert (dry.by_append, dry.conflicts) == ([], [EVENTS])
    assert reason in dry.reasons[EVENTS]
    with pytest.raises(RatuiError) as err:
        engine.merge(ref)
    assert err.value.code == "RAT-CAT-003" and err.value.details["tables"] == [EVENTS]
    assert metadata_bytes(engine) == before


def test_a_delete_on_main_is_still_a_conflict(project):
    engine = Engine.open(project)
    run(engine)
    engine.create_branch("dev")
    set_events(project, [(10, "a")])
    run(engine, "dev")
    table = engine.load_table("main", EVENTS)
    table.delete("id = 1")  # another engine's row delete on main
    engine.state.catalog.record_commit("main", "delete id 1")
    dry = engine.merge("dev", dry_run=True)
    assert dry.conflicts == [EVENTS] and "delete" in dry.reasons[EVENTS]
    with pytest.raises(RatuiError) as err:
        engine.merge("dev")
    assert err.value.code == "RAT-CAT-003"
    assert rows(engine) == [(2, "b")]


def test_a_partitioned_table_merges_by_append_and_expired_snapshots_on_main_do_not_matter(make_project, spark):
    root = new_project(make_project, partitioned=True)
    engine = Engine.open(root)
    two_appending_branches(engine, root, partitioned=True)
    # main expires every snapshot but its current one, the fork's included
    table = engine.load_table("main", EVENTS)
    old = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != table.metadata.current_snapshot_id]
    table.maintenance.expire_snapshots().by_ids(old).commit()
    engine.state.catalog.record_commit("main", "expired")
    assert len(engine.load_table("main", EVENTS).metadata.snapshots) == 1

    assert engine.merge("dev1").by_append == [EVENTS]
    assert engine.merge("dev2").by_append == [EVENTS]
    assert rows(engine) == [(1, "a"), (2, "b"), (3, "a"), (10, "a"), (11, "c"), (20, "b")]
    table = engine.load_table("main", EVENTS)
    assert [f.name for f in table.spec().fields] == ["kind"]
    # each re-committed file keeps its partition: a filter on it prunes to the right files
    assert sorted(r["id"] for r in table.scan(row_filter="kind = 'c'").to_arrow().to_pylist()) == [11]


def test_both_sides_loading_the_same_landing_file_is_a_conflict(make_project, spark):
    root = make_project({
        "demo/landing/events/e1.jsonl": '{"id": 1, "kind": "a"}\n',
        "demo/pipelines/bronze/events/pipeline.sql": (
            "-- @merge_strategy: append_only\n-- @landing_mode: new_files\n"
            "SELECT id, kind FROM {{ landing_zone('events') }}\n"),
    })
    engine = Engine.open(root)
    run(engine)
    engine.create_branch("dev")
    (root / "demo/landing/events/e2.jsonl").write_text('{"id": 2, "kind": "b"}\n')
    run(engine, "dev")
    run(engine)  # main loads e2 too: a merge by append would add its rows twice
    dry = engine.merge("dev", dry_run=True)
    assert dry.conflicts == [EVENTS] and "e2.jsonl" in dry.reasons[EVENTS]
    with pytest.raises(RatuiError) as err:
        engine.merge("dev")
    assert err.value.code == "RAT-CAT-003"
    assert rows(engine) == [(1, "a"), (2, "b")]


def test_ratui_merge_dry_run_says_which_tables_merge_by_append(project, capsys):
    from ratui.cli import main as cli_main
    import json

    engine = Engine.open(project)
    two_appending_branches(engine, project)
    (project / "demo/pipelines/silver/kinds").mkdir(parents=True)
    (project / "demo/pipelines/silver/kinds/pipeline.sql").write_text(
        "SELECT kind, count(*) AS n FROM {{ ref('bronze.events') }} GROUP BY kind\n")
    run(engine, "dev1", "silver.kinds")  # new on dev1: merges as is
    run(engine, "dev2", "silver.kinds")
    capsys.readouterr()
    assert cli_main(["merge", "dev1", "--dry-run", "--project", str(project)]) == 0
    out = capsys.readouterr().out
    line = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("demo.")}
    assert line[EVENTS].rstrip().endswith("by append") and line[KINDS].rstrip().endswith("as is")
    assert "1 table(s) merge by append" in out
    assert cli_main(["merge", "dev1", "--project", str(project)]) == 0
    capsys.readouterr()
    # dev2: events by append, kinds (a full rebuild on both sides now) a conflict with its reason
    assert cli_main(["merge", "dev2", "--dry-run", "--json", "--project", str(project)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["by_append"], report["conflicts"]) == ([EVENTS], [KINDS])
    assert cli_main(["merge", "dev2", "--dry-run", "--project", str(project)]) == 1
    out = capsys.readouterr().out
    assert f"{KINDS}: " in out and "conflict" in out


# ------------------------------------------------------------------------------------------------ property

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st  # noqa: E402

_BATCH = st.lists(st.tuples(st.integers(0, 40), st.sampled_from("abc")), min_size=1, max_size=3)
_SEQ = iter(range(1_000_000))


@hsettings(max_examples=8, deadline=None,  # each example: a dozen Spark runs, seconds
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(main_runs=st.lists(_BATCH, max_size=2), a_runs=st.lists(_BATCH, min_size=1, max_size=2),
       b_runs=st.lists(_BATCH, min_size=1, max_size=2), partitioned=st.booleans())
def test_merging_by_append_equals_running_both_branches_runs_serially_on_main(make_project, spark, main_runs, a_runs,
                                                                               b_runs, partitioned):
    """Branches a and b fork from main; each appends its batches, main appends its own meanwhile; a then b merge.
    main ends with exactly the rows of running main's, a's and b's runs one after another on main."""
    n = next(_SEQ)
    base = [(100, "a"), (101, "b")]

    def append(engine, root, ref, batch):
        set_events(root, batch, partitioned=partitioned)
        results = engine.run(engine.compile().select(["bronze.events"]), ref=ref, force=True)
        assert [r.status for r in results] == ["success"], [r.error for r in results]

    merged_root = new_project(make_project, f"merged{n}", partitioned=partitioned)
    merged = Engine.open(merged_root)
    append(merged, merged_root, "main", base)
    merged.create_branch("a")
    merged.create_branch("b")
    for batch in a_runs:
        append(merged, merged_root, "a", batch)
    for batch in b_runs:
        append(merged, merged_root, "b", batch)
    for batch in main_runs:
        append(merged, merged_root, "main", batch)
    merged.merge("a")
    second = merged.merge("b")
    assert second.by_append == [EVENTS]

    serial_root = new_project(make_project, f"serial{n}", partitioned=partitioned)
    serial = Engine.open(serial_root)
    for batch in [base, *main_runs, *a_runs, *b_runs]:
        append(serial, serial_root, "main", batch)
    assert rows(merged) == rows(serial)
    assert rows(merged) == sorted(r for batch in [base, *main_runs, *a_runs, *b_runs] for r in batch)
