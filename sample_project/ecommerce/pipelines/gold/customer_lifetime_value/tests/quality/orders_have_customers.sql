-- Referential check: every customer who ordered is a known customer (and so has a row here).
SELECT o.order_id, o.customer_id
FROM {{ ref('silver.clean_orders') }} AS o
LEFT ANTI JOIN {{ this }} AS c
    ON o.customer_id = c.customer_id
