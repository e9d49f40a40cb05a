"""Landing zones: where raw files arrive, wherever they are, behind one interface.

    names.py     the rules every zone shares: which names are active files, `_processed/`, archived names
    zone.py      the `Zone` protocol, `ZoneEntry` (a listed file and its identity) and `open_zone`, which picks
                 the implementation from the zone's URL scheme (SCHEMES: a factory per scheme)
    local.py     a folder of the project ({namespace}/landing/{zone}/)
    s3.py        an S3-compatible bucket and prefix (boto3)
    files.py     `ZoneFile`, a file as a run reads it: a local path, a downloaded copy, or an object read in
                 place (its bytes through ranged reads pinned to the listed ETag), and what Spark reads
    reader.py    reading a zone's files into Spark (checks, columns by name, bad rows)
    formats/     one module per file format (csv, json, parquet): its FORMAT says how its files are read and which
                 columns a file names; formats/__init__.py's FORMATS lists them
    read_contract.py, read_checks.py   what the reader and the formats share (neither imports the other back)
    zone_columns.py  a zone's columns from its files' first bytes (column lineage)

Callers (the compiler, a run's sources, archiving, change detection, the watcher, the reaper) hold a `Zone` and
never ask whether it is local or remote.
"""
