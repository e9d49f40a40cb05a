-- @merge_strategy: append_only
-- @landing_mode: new_files
-- @description: Clickstream events; each landing file is loaded exactly once (the landing ledger tracks them)
-- @tags: ingest, events, marketing

SELECT
    event_id,
    CAST(event_ts AS TIMESTAMP) AS event_ts,
    customer_id,
    product_id,
    event_type,
    session_id,
    regexp_extract(input_file_name(), '[^/]+$', 0) AS source_file
FROM {{ landing_zone('events') }}
