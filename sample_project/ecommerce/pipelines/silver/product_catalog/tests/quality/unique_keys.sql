-- product_id and sku are both unique.
SELECT 'product_id' AS key_column, CAST(product_id AS STRING) AS key_value, COUNT(*) AS c
FROM {{ this }}
GROUP BY product_id
HAVING COUNT(*) > 1 OR product_id IS NULL
UNION ALL
SELECT 'sku' AS key_column, sku AS key_value, COUNT(*) AS c
FROM {{ this }}
GROUP BY sku
HAVING COUNT(*) > 1 OR sku IS NULL
