-- @merge_strategy: append_only
SELECT * FROM VALUES (1, 'a') AS t(id, code)
