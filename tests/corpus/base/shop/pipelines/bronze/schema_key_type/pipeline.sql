-- @merge_strategy: incremental
-- @unique_key: id
SELECT * FROM VALUES ('k1', 1), ('k2', 2) AS t(id, v)
