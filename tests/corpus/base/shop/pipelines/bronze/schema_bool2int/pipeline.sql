-- @merge_strategy: append_only
SELECT 1 AS id, true AS flag
