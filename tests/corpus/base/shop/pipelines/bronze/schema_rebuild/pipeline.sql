-- @merge_strategy: full_refresh
SELECT * FROM VALUES (1, 'a') AS t(id, code)
