-- @merge_strategy: append_only
SELECT 1 AS id, TIMESTAMP '2024-01-01 10:00:00' AS seen_at
