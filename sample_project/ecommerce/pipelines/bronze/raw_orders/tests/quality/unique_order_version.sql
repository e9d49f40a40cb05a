-- Bronze may hold several versions of an order, but never the same version twice.
SELECT order_id, updated_at, COUNT(*) AS copies
FROM {{ this }}
GROUP BY order_id, updated_at
HAVING COUNT(*) > 1
