-- @severity: error
-- Preview files under _samples/ must never be ingested (their order_ids are 999995..999999).
SELECT order_id, source_file
FROM {{ this }}
WHERE order_id >= 999995
   OR source_file LIKE '%sample%'
