SELECT product_id, COUNT(*) AS c
FROM {{ this }}
GROUP BY product_id
HAVING COUNT(*) > 1 OR product_id IS NULL
