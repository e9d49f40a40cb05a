SELECT order_date, category, COUNT(*) AS c
FROM {{ this }}
GROUP BY order_date, category
HAVING COUNT(*) > 1
