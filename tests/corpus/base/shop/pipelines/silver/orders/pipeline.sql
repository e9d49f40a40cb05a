-- @merge_strategy: incremental
-- @unique_key: order_id
-- @watermark_column: updated_at
SELECT
    CAST(order_id AS INT) AS order_id,
    CAST(customer_id AS INT) AS customer_id,
    CAST(amount AS DECIMAL(10, 2)) AS amount,
    lower(status) AS status,
    CAST(updated_at AS TIMESTAMP) AS updated_at
FROM {{ ref('bronze.raw_orders') }}
{% if is_incremental() and watermark_value %}
WHERE CAST(updated_at AS TIMESTAMP) > TIMESTAMP '{{ watermark_value }}'
{% endif %}
