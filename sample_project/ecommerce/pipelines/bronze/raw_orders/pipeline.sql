-- @merge_strategy: full_refresh
-- @description: Every order row from every active orders file, as delivered (versions and duplicates included)
-- @tags: ingest, orders

-- Bronze keeps the raw history: an order re-listed by a later file appears once per file here.
-- silver.clean_orders keeps the latest version of each order.
SELECT
    order_id,
    customer_id,
    product_id,
    quantity,
    CAST(unit_price AS DECIMAL(12, 2)) AS unit_price,   -- money never travels as a double
    status,
    order_date,
    updated_at,
    regexp_extract(input_file_name(), '[^/]+$', 0) AS source_file,
    CAST('{{ run_started_at }}' AS TIMESTAMP) AS ingested_at
FROM {{ landing_zone('orders') }}
