"""The engine: everything but the terminal. No Textual, no Rich below this line (import contracts in pyproject.toml).

From the top down (each package imports only those below it: the contract "The engine's sub-packages form a DAG"):

    watch/      watch mode: file changes -> run plans, run through the Engine
    facade/     the Engine, the one door: compile, runs, branches and refs, landing, queries, upkeep
    ops/        around the runs: branches and merges, atomic publish, undo, the reaper and its orphan-file sweep
    run/        one invocation and its runs: change detection, the executor and its phases, the run record (the
                only writer of runs and run logs), runs in flight, recovery, quality, queries
    isolation/  running a Python pipeline's own code in a confined child (Landlock, seccomp, bubblewrap)
    write/      how a result lands in a table: strategies, pruning, preparing, writing and committing files
    iceberg/    Iceberg tables seen from Spark: schemas, reading, position deletes, describing
    spark/      the one place that knows how Spark is reached: session, job groups, cancellation, quiet logs
    state/      the project's SQLite state: catalog and branches, run history, landing ledger, journal
    project/    the project as written: discovery, names, settings, config, templating, the DAG, the compile step
    landing/    landing zones: local and S3, formats, the active-file rule, archiving
    storage/    the warehouse's place (a folder or an s3:// bucket) and staging for a remote Spark
    locations  events  errors  vocabulary  failpoints  sql_text
                path rules, typed events, coded errors, shared words, test failpoints, SQL text helpers
"""
