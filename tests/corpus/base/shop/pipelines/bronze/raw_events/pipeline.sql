-- @merge_strategy: append_only
-- @landing_mode: new_files
SELECT event_id, kind, product_id, CAST(ts AS TIMESTAMP) AS ts FROM {{ landing_zone('events') }}
