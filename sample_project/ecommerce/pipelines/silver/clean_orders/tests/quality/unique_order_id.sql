-- @severity: error
SELECT order_id, COUNT(*) AS c
FROM {{ this }}
GROUP BY order_id
HAVING COUNT(*) > 1
