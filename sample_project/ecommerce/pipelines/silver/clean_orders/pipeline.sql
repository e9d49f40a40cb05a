-- @merge_strategy: incremental
-- @unique_key: order_id
-- @watermark_column: updated_at
-- @description: One row per order at its latest known version, typed and with normalised status
-- @tags: daily, orders

-- Only versions newer than what the table already holds are selected. When one batch holds several
-- versions of an order (a later file re-lists it, or a file lists it twice) the engine keeps the one
-- with the latest updated_at, so no dedup happens here.
SELECT
    CAST(order_id AS INT) AS order_id,
    CAST(customer_id AS INT) AS customer_id,
    CAST(product_id AS BIGINT) AS product_id,
    CAST(quantity AS INT) AS quantity,
    CAST(unit_price AS DECIMAL(12, 2)) AS unit_price,
    CAST(CAST(quantity AS INT) * CAST(unit_price AS DECIMAL(12, 2)) AS DECIMAL(12, 2)) AS amount,
    lower(trim(status)) AS status,
    CAST(order_date AS DATE) AS order_date,
    CAST(updated_at AS TIMESTAMP) AS updated_at,
    source_file
FROM {{ ref('bronze.raw_orders') }}
{% if is_incremental() and watermark_value %}
WHERE CAST(updated_at AS TIMESTAMP) > TIMESTAMP '{{ watermark_value }}'
{% endif %}
