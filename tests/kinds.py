"""Every test's kind, in one table: which modules need a JVM or a server, and so which tests the short loop runs.

    unit    no JVM, no server: `pytest -m unit` (enforced by tests/unit_guard.py, not trusted)
    spark   a local Spark: this process's JVM (the `spark` fixture, an Engine's run or query), or a `ratui`
            subprocess that starts its own, or the confined runs' data server
    server  a server beside it: Nessie, moto's S3, a standalone Spark cluster, Spark Connect

tests/conftest.py marks every collected test with its kind from here. A new test module is added to MODULES (a
module that is not fails collection, naming this file); a test whose kind differs from its module's (a parameter
that starts a server, say) is named in EXCEPTIONS by a pattern on its id after the module's "::" (`*[nessie]`: `*` is
any run of characters, everything else is literal); of the patterns that match, the last one listed wins.
"""

from __future__ import annotations

import re

UNIT, SPARK, SERVER = "unit", "spark", "server"
KINDS = (UNIT, SPARK, SERVER)

MODULES: dict[str, str] = {
    "tests/alerts/test_channels.py": UNIT,  # webhook, SMTP and command channels: real servers, no JVM
    "tests/alerts/test_freshness.py": SPARK,  # tables built by `ratui run`, then `ratui up` watching them age
    "tests/alerts/test_run_alerts.py": SPARK,  # runs that fail, fail and recover, through `ratui run`
    "tests/alerts/test_runner_alerts.py": SPARK,  # `ratui up` firing a slow run: stuck and missed
    "tests/api/test_nessie.py": SERVER,
    "tests/api/test_notebook.py": SPARK,
    "tests/api/test_offline.py": UNIT,
    "tests/api/test_warm_api.py": SPARK,
    "tests/cli/test_backfill_cli.py": SPARK,
    "tests/cli/test_cli.py": SPARK,
    "tests/cli/test_lineage_cli.py": UNIT,
    "tests/cli/test_nessie_cli.py": SERVER,
    "tests/cli/test_schedules_cli.py": UNIT,
    "tests/cli/test_stop_signals.py": SPARK,
    "tests/cli/test_warm_bounds.py": SPARK,  # engines renewed, wedged, on a full disk (a tmpfs it mounts: root)
    "tests/cli/test_warm_engine.py": SPARK,  # and the warm engines it starts (each a JVM of its own)
    "tests/cli/test_warm_parts.py": UNIT,
    "tests/console/test_console_logs.py": UNIT,
    "tests/console/test_follow.py": UNIT,
    "tests/console/test_query_history.py": UNIT,
    "tests/console/test_run_compare.py": UNIT,
    "tests/corpus/test_corpus.py": SPARK,  # every case starts from the base state, one `ratui run`
    "tests/docs/test_docs_site.py": UNIT,
    "tests/docs/test_getting_started.py": SPARK,
    "tests/e2e/test_console_serves_shell.py": SPARK,
    "tests/e2e/test_tmux.py": SPARK,
    "tests/e2e/test_web.py": UNIT,
    "tests/e2e/test_web_access.py": UNIT,
    "tests/engine/isolation/test_confinement.py": UNIT,
    "tests/engine/isolation/test_child_exit.py": SPARK,
    "tests/engine/isolation/test_data_server_early.py": SPARK,  # and the data server, started ahead of its run
    "tests/engine/isolation/test_fork_server.py": UNIT,  # a real template and real confinement, no JVM
    "tests/engine/isolation/test_isolated_runs.py": SPARK,  # and the data server, a Spark Connect JVM ratui starts
    "tests/engine/ops/test_append_merge.py": SPARK,
    "tests/engine/ops/test_branches.py": SPARK,
    "tests/engine/ops/test_changes.py": SPARK,
    "tests/engine/ops/test_gc.py": UNIT,
    "tests/engine/ops/test_reaper.py": UNIT,
    "tests/engine/ops/test_reaper_nessie.py": SERVER,
    "tests/engine/ops/test_schedules.py": UNIT,
    "tests/engine/ops/test_undo.py": SPARK,
    "tests/engine/ops/test_watch.py": UNIT,
    "tests/engine/project/test_column_lineage.py": UNIT,
    "tests/engine/project/test_compile.py": UNIT,
    "tests/engine/project/test_intervals.py": UNIT,
    "tests/engine/project/test_compile_cache.py": UNIT,
    "tests/engine/project/test_outline.py": UNIT,
    "tests/engine/project/test_schema.py": UNIT,
    "tests/engine/run/test_backfill.py": SPARK,
    "tests/engine/run/test_column_lineage_run.py": SPARK,
    "tests/engine/run/test_csv_delimiter.py": UNIT,
    "tests/engine/run/test_csv_types.py": SPARK,
    "tests/engine/run/test_data_diff.py": SPARK,
    "tests/engine/run/test_json_documents.py": UNIT,
    "tests/engine/run/test_nessie_installations.py": SERVER,
    "tests/engine/run/test_nessie_sample.py": SERVER,
    "tests/engine/run/test_progress.py": SPARK,
    "tests/engine/run/test_query.py": SPARK,
    "tests/engine/run/test_query_rewrite.py": UNIT,
    "tests/engine/run/test_read_only_sql.py": UNIT,
    "tests/engine/run/test_reliability.py": SPARK,
    "tests/engine/run/test_runs.py": SPARK,
    "tests/engine/spark/test_class_archive.py": UNIT,
    "tests/engine/spark/test_cluster.py": SERVER,
    "tests/engine/spark/test_connect.py": SERVER,
    "tests/engine/spark/test_jit.py": UNIT,
    "tests/engine/spark/test_s3a_jars.py": UNIT,
    "tests/engine/spark/test_side_start.py": UNIT,
    "tests/engine/spark/test_where.py": UNIT,
    "tests/engine/state/test_catalog.py": SPARK,
    "tests/engine/state/test_catalog_config.py": UNIT,
    "tests/engine/state/test_db.py": UNIT,
    "tests/engine/state/test_history_recent.py": UNIT,
    "tests/engine/state/test_history_retention.py": UNIT,
    "tests/engine/state/test_landing_facts.py": UNIT,
    "tests/engine/state/test_ledger_refs.py": UNIT,
    "tests/engine/state/test_ledger_scale.py": UNIT,
    "tests/engine/state/test_migrations.py": UNIT,
    "tests/engine/state/test_nessie_faults.py": SERVER,
    "tests/engine/state/test_nessie_other_engines.py": SERVER,
    "tests/engine/test_declared_lists.py": UNIT,
    "tests/engine/test_edges.py": SPARK,
    "tests/engine/test_failpoints.py": UNIT,
    "tests/engine/test_record_owners.py": UNIT,
    "tests/engine/test_landing_zones.py": SPARK,
    "tests/engine/test_s3_in_place.py": SERVER,
    "tests/engine/test_s3_tables.py": SERVER,
    "tests/engine/test_s3_warehouse.py": SERVER,
    "tests/engine/test_s3_zones.py": SERVER,
    "tests/engine/write/test_file_size.py": SPARK,
    "tests/engine/write/test_merge_on_read.py": SPARK,
    "tests/engine/write/test_scd2_merge_on_read.py": SPARK,
    "tests/engine/write/test_strategies.py": SPARK,
    "tests/engine/write/test_strategies_properties.py": SPARK,
    "tests/runner/test_dashboard.py": UNIT,
    "tests/runner/test_up.py": SPARK,  # real `ratui up` processes, each starting its Spark when it fires
    "tests/rest/test_clients.py": SPARK,
    "tests/rest/test_console_history.py": UNIT,
    "tests/rest/test_door.py": UNIT,
    "tests/rest/test_moved_project.py": UNIT,
    "tests/rest/test_nessie.py": SERVER,
    "tests/rest/test_openapi.py": UNIT,
    "tests/rest/test_read_only_refs.py": UNIT,
    "tests/test_code.py": UNIT,
    "tests/test_kinds.py": UNIT,
    "tests/tui/test_branch_workflow.py": UNIT,
    "tests/tui/test_column_lineage.py": UNIT,
    "tests/tui/test_data_diff_console.py": UNIT,
    "tests/tui/test_finding_things.py": UNIT,
    "tests/tui/test_lineage.py": UNIT,
    "tests/tui/test_lineage_scale.py": UNIT,
    "tests/tui/test_live_events.py": UNIT,
    "tests/tui/test_live_runs.py": SPARK,
    "tests/tui/test_logs_compare.py": UNIT,
    "tests/tui/test_merge_by_append.py": UNIT,
    "tests/tui/test_nessie_screens.py": SERVER,
    "tests/tui/test_no_stale_failures.py": UNIT,
    "tests/tui/test_outline_console.py": UNIT,
    "tests/tui/test_pilot_helpers.py": UNIT,
    "tests/tui/test_query.py": SPARK,
    "tests/tui/test_read_only.py": UNIT,
    "tests/tui/test_reaper_gc.py": UNIT,
    "tests/tui/test_scale_console.py": UNIT,
    "tests/tui/test_alerts_console.py": UNIT,
    "tests/tui/test_schedules_console.py": UNIT,
    "tests/tui/test_screen_specs.py": UNIT,
    "tests/tui/test_screens.py": UNIT,
    "tests/tui/test_serve_toggle.py": UNIT,
    "tests/tui/test_shell_engine.py": UNIT,
    "tests/tui/test_small_terminal.py": UNIT,
    "tests/tui/test_snapshots.py": UNIT,
    "tests/tui/test_spark_progress.py": UNIT,
    "tests/tui/test_spark_where.py": UNIT,
    "tests/tui/test_undo_console.py": UNIT,
    "tests/tui/test_watch_landing_reaper.py": UNIT,
    "tests/tui/test_working_ref.py": UNIT,
}

# a test's name after its module's "::", as a pattern (* any run of characters; [ and ] are plain) -> its kind
EXCEPTIONS: dict[str, dict[str, str]] = {
    "tests/cli/test_cli.py": {
        "test_missing_project_is_a_clear_error": UNIT,
        "test_the_engine_imports_without_pandas_which_still_imports_after": UNIT,
    },
    "tests/corpus/test_corpus.py": {
        "test_docstring_counts_are_true": UNIT,
        "test_every_runtime_case_owns_its_pipeline": UNIT,
    },
    "tests/e2e/test_web.py": {  # a console in the browser warms Spark up
        "test_web_serves_the_console_to_a_browser_and_leaves_nothing_behind": SPARK,
    },
    "tests/e2e/test_web_access.py": {
        "test_a_read_only_server_with_one_session_refuses_changes_and_a_second_tab": SPARK,
        "test_an_idle_session_is_closed_and_its_console_ends": SPARK,
    },
    "tests/engine/isolation/test_data_server_early.py": {
        "test_an_early_start_that_fails_is_kept_for_the_run_that_needs_the_server": UNIT,
    },
    "tests/engine/isolation/test_isolated_runs.py": {
        "test_a_level_the_machine_cannot_give_is_refused_when_required": UNIT,
    },
    "tests/engine/ops/test_append_merge.py": {"*[nessie]": SERVER, "*[nessie-*]": SERVER},
    "tests/engine/ops/test_branches.py": {"*[nessie]": SERVER},
    "tests/engine/ops/test_reaper.py": {"test_real_runs_then_expiry_and_sweep_keep_main_whole": SPARK},
    "tests/engine/ops/test_watch.py": {
        "test_a_landing_file_still_being_copied_when_the_watch_runs_lands_once_whole": SPARK,
        "test_a_watch_on_a_branch_runs_there_and_leaves_main_alone": SPARK,
        "test_saving_a_pipeline_triggers_a_real_run": SPARK,
    },
    "tests/engine/run/test_csv_types.py": {"test_files_that_are_not_plain_are_left_to_spark": UNIT},
    "tests/engine/spark/test_class_archive.py": {
        "test_a_garbage_archive_never_stops_spark": SPARK,
        "test_a_java_option_the_jvm_refuses_is_reported_and_the_archive_stays": SPARK,
        "test_the_next_spark_maps_the_archive_the_first_one_wrote": SPARK,
    },
    "tests/engine/ops/test_undo.py": {
        "*[nessie]": SERVER,
        "test_an_undo_whose_branch_is_gone_or_whose_journal_moved_on_is_refused_with_rat_undo_003": UNIT,
    },
    "tests/engine/spark/test_connect.py": {"test_an_unreachable_server_fails_the_run_at_once_with_a_coded_error": UNIT},
    "tests/engine/spark/test_side_start.py": {
        "test_a_jvm_started_on_the_side_that_no_run_used_writes_no_class_archive": SPARK,
        "test_a_jvm_that_ran_nothing_writes_no_class_archive": SPARK,
    },
    "tests/engine/spark/test_where.py": {"test_the_local_session_says_where_it_runs": SPARK},
    "tests/engine/state/test_catalog.py": {
        "*[nessie]": SERVER,
        "test_nessie_*": SERVER,
        "test_nessie_unreachable_is_a_coded_error_and_fast": UNIT,
        "test_open_creates_main_and_is_idempotent[sqlite]": UNIT,
        "test_in_tx_hook_commits_or_rolls_back_with_the_merge": UNIT,
        "test_merge_swap_is_guarded_by_the_fork_location": UNIT,
        "test_previous_metadata_location_is_set_by_merge": UNIT,
        "test_two_processes_merge_different_tables_concurrently": UNIT,
    },
    "tests/engine/state/test_catalog_config.py": {"test_project_state_opens_nessie_from_ratui_yaml": SERVER},
    "tests/engine/test_landing_zones.py": {
        "*[s3]": SERVER,
        "*[s3-in-place]": SERVER,
        "test_a_local_file_that_changed_after_listing_is_reported": UNIT,
        "test_a_local_zone_never_purges_through_a_symlink_out_of_the_project": UNIT,
        "test_a_local_zone_that_is_not_there_is_named_with_the_ones_that_are": UNIT,
        "test_open_zone_picks_the_kind_from_the_settings[local]": UNIT,
    },
    "tests/engine/write/test_file_size.py": {
        "test_a_bad_target_file_size_is_a_coded_error*": UNIT,
        "test_target_file_size_is_read_from_config_yaml_and_annotations*": UNIT,
    },
    "tests/tui/test_branch_workflow.py": {"test_atomic_publish_on_a_dev_branch": SPARK},
    "tests/tui/test_column_lineage.py": {
        "test_lineage_c_lists_columns_and_a_column_path_reaches_the_landing_zone": SPARK,
    },
    "tests/tui/test_query.py": {
        "test_escape_leaves_the_editor_so_the_screen_keys_work_again": UNIT,
        "test_query_screen_snapshot*": UNIT,
        "test_t_on_a_pipeline_never_run_says_there_is_no_table_yet": UNIT,
        "test_table_view_columns_snapshot": UNIT,
    },
    "tests/tui/test_shell_engine.py": {  # a warm engine of the shell's, and its JVM
        "test_the_line_follows_a_real_engine_started_and_stopped_from_the_shell": SPARK,
    },
    "tests/tui/test_spark_where.py": {"test_the_status_line_shows_where_spark_runs": SPARK},
}


class UnknownModule(LookupError):
    pass


def kind_of(nodeid: str) -> str:
    """The kind of the test `nodeid` ("tests/x/test_y.py::test_z[param]"); UnknownModule when its module is missing."""
    module, _, name = nodeid.partition("::")
    if module not in MODULES:
        raise UnknownModule(module)
    found = [kind for pattern, kind in EXCEPTIONS.get(module, {}).items() if _matches(name, pattern)]
    return found[-1] if found else MODULES[module]  # the last pattern that matches: the more particular below


def _matches(name: str, pattern: str) -> bool:
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name) is not None


def collection_problem(nodeids: list[str], marked_by_hand: list[str] = ()) -> str | None:
    """What is wrong with the table for these collected tests, or None: modules without a kind, tests marked with a
    kind by hand, and (when every module of the table was collected) exceptions that name no test."""
    missing = sorted({n.partition("::")[0] for n in nodeids} - set(MODULES))
    if missing:
        return missing_message(missing)
    if marked_by_hand:
        return "a test's kind comes from tests/kinds.py alone; marked by hand: " + ", ".join(marked_by_hand[:5])
    if set(MODULES) <= {n.partition("::")[0] for n in nodeids}:  # the whole suite: no pattern may be stale
        stale = unused_exceptions(nodeids)
        if stale:
            return ("EXCEPTIONS in tests/kinds.py name tests that are not there (renamed or gone?):\n"
                    + "\n".join(f"    {s}" for s in stale))
    return None


def missing_message(modules: list[str]) -> str:
    listed = "\n".join(f"    {m!r}: UNIT | SPARK | SERVER," for m in sorted(set(modules)))
    return (f"{len(set(modules))} test module(s) have no kind: add them to MODULES in tests/kinds.py\n{listed}\n"
            "(unit: no JVM and no server, enforced; spark: a local Spark; server: Nessie, S3, a cluster, Connect)")


def unused_exceptions(nodeids: list[str]) -> list[str]:
    """The patterns of EXCEPTIONS that match none of `nodeids` (a test renamed or gone): "module::pattern"."""
    names: dict[str, list[str]] = {}
    for nodeid in nodeids:
        module, _, name = nodeid.partition("::")
        names.setdefault(module, []).append(name)
    return [f"{module}::{pattern}" for module, patterns in EXCEPTIONS.items() for pattern in patterns
            if not any(_matches(name, pattern) for name in names.get(module, []))]
