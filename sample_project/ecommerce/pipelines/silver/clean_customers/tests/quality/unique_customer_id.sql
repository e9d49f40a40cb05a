SELECT customer_id, COUNT(*) AS c
FROM {{ this }}
GROUP BY customer_id
HAVING COUNT(*) > 1 OR customer_id IS NULL
