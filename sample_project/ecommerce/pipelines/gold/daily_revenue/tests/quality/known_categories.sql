-- 'unknown' means an order's product is missing from silver.product_catalog.
SELECT order_date, category, order_count
FROM {{ this }}
WHERE category = 'unknown'
