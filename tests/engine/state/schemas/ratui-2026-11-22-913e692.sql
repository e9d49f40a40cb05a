CREATE TABLE catalog_commits (
    hash        TEXT PRIMARY KEY,
    parent      TEXT,
    ref         TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    pointers    TEXT NOT NULL            -- JSON object: table key -> metadata location
);
CREATE TABLE catalog_fork_pointers (
    ref                TEXT NOT NULL,
    table_key          TEXT NOT NULL,
    metadata_location  TEXT NOT NULL,
    PRIMARY KEY (ref, table_key)
);
CREATE TABLE catalog_refs (
    name        TEXT PRIMARY KEY,
    head        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    fork_hash   TEXT,
    run_id      TEXT
);
CREATE TABLE iceberg_namespace_properties (
	catalog_name VARCHAR(255) NOT NULL, 
	namespace VARCHAR(255) NOT NULL, 
	property_key VARCHAR(255) NOT NULL, 
	property_value VARCHAR(1000) NOT NULL, 
	PRIMARY KEY (catalog_name, namespace, property_key)
);
CREATE TABLE iceberg_tables (
	catalog_name VARCHAR(255) NOT NULL, 
	table_namespace VARCHAR(255) NOT NULL, 
	table_name VARCHAR(255) NOT NULL, 
	metadata_location VARCHAR(1000), 
	previous_metadata_location VARCHAR(1000), 
	iceberg_type VARCHAR(5), 
	PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE landing_files (
    namespace TEXT NOT NULL,
    zone TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    file TEXT NOT NULL,            -- name at the zone's root
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    etag TEXT,                     -- for object stores (S3): kept empty for local files
    version TEXT,
    state TEXT NOT NULL DEFAULT 'unloaded',
    run_id TEXT,                   -- the run that loaded it
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    archived_to TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (namespace, zone, pipeline, file)
);
CREATE TABLE "quality_results" (
   "id" INTEGER PRIMARY KEY,
   "run_id" TEXT,
   "test" TEXT,
   "severity" TEXT,
   "status" TEXT,
   "violations" INTEGER,
   "duration_ms" INTEGER,
   "sample" TEXT,
   "columns" TEXT,
   "sql" TEXT,
   "error" TEXT,
   "file" TEXT,
   "finished_at" TEXT
);
CREATE TABLE "run_logs" (
   "id" INTEGER PRIMARY KEY,
   "run_id" TEXT,
   "at" TEXT,
   "level" TEXT,
   "message" TEXT
);
CREATE TABLE "runs" (
   "id" TEXT PRIMARY KEY,
   "pipeline" TEXT,
   "status" TEXT,
   "trigger" TEXT,
   "strategy" TEXT,
   "run_type" TEXT,
   "reason" TEXT,
   "queued_at" TEXT,
   "started_at" TEXT,
   "finished_at" TEXT,
   "duration_ms" INTEGER,
   "rows_written" INTEGER,
   "warnings" INTEGER,
   "error_code" TEXT,
   "error_message" TEXT,
   "error_hint" TEXT,
   "error_file" TEXT,
   "error_line" INTEGER,
   "branch" TEXT,
   "phases" TEXT,
   "write" TEXT,
   "notes" TEXT,
   "pid" INTEGER,
   "host" TEXT,
   "invocation" TEXT,
   "fingerprint" TEXT,
   "inputs" TEXT
);
CREATE INDEX catalog_commits_ref ON catalog_commits (ref);
CREATE INDEX "idx_quality_results_run_id"
    ON "quality_results" ("run_id");
CREATE INDEX "idx_run_logs_run_id"
    ON "run_logs" ("run_id");
CREATE INDEX "idx_runs_pipeline_started_at"
    ON "runs" ("pipeline", "started_at");
CREATE INDEX "idx_runs_started_at"
    ON "runs" ("started_at");
CREATE INDEX "idx_runs_status"
    ON "runs" ("status");
CREATE INDEX landing_files_state ON landing_files (namespace, zone, state);
