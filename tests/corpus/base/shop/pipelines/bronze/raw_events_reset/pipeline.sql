-- @merge_strategy: append_only
-- @landing_mode: new_files
SELECT * FROM {{ landing_zone('events_reset') }}
