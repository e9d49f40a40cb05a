-- @merge_strategy: append_only
SELECT * FROM VALUES (1, 10), (2, 20) AS t(id, qty)
