SELECT
    product_id,
    sku,
    name,
    category,
    unit_price,
    active,
    CAST('{{ run_started_at }}' AS TIMESTAMP) AS ingested_at
FROM {{ landing_zone('products') }}
