-- @merge_strategy: full_refresh
-- @description: Product dimension with clean names, prices and an active flag
-- @tags: products

SELECT
    CAST(product_id AS BIGINT) AS product_id,
    upper(trim(sku)) AS sku,
    trim(name) AS product_name,
    lower(trim(category)) AS category,
    CAST(unit_price AS DECIMAL(12, 2)) AS list_price,
    coalesce(active, false) AS is_active
FROM {{ ref('bronze.raw_products') }}
