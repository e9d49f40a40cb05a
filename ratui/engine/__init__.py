"""The engine: everything but the terminal. No Textual, no Rich below this line (import contracts in pyproject.toml).

    vocabulary  errors  events  locations      shared words, coded errors, typed events, path rules
    project/    the project as written: discovery, names, settings, config, templating, the DAG, the compile step
    run/        the Engine (the one door), invocations, one run's phases and inputs, recovery, quality, queries
    write/      how a result lands in a table: strategies, pruning, preparing, writing and committing files
    iceberg/    Iceberg tables seen from Spark: schemas and reading
    spark/      the one place that knows how Spark is reached: session, job groups, cancellation, quiet logs
    state/      the project's SQLite state: catalog and branches, run history, landing ledger
    ops/        around the runs: change detection, watch mode, the reaper and its orphan sweep
"""
