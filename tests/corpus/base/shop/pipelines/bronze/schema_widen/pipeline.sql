-- @merge_strategy: append_only
SELECT CAST(1 AS INT) AS id, CAST(7 AS INT) AS qty
