-- @merge_strategy: append_only
-- @archive_landing_zones: true
SELECT * FROM {{ landing_zone('gone_archive') }}
