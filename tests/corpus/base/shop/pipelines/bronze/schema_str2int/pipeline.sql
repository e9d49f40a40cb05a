-- @merge_strategy: append_only
SELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, code)
