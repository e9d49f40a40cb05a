-- @severity: error
-- Gross revenue and order count add up to the non-cancelled orders of silver.clean_orders.
WITH gold AS (
    SELECT SUM(gross_revenue) AS revenue, SUM(order_count) AS orders
    FROM {{ this }}
),
silver AS (
    SELECT SUM(amount) AS revenue, COUNT(*) AS orders
    FROM {{ ref('silver.clean_orders') }}
    WHERE status <> 'cancelled'
)
SELECT gold.revenue AS gold_revenue, silver.revenue AS silver_revenue,
       gold.orders AS gold_orders, silver.orders AS silver_orders
FROM gold CROSS JOIN silver
WHERE NOT (gold.revenue <=> silver.revenue)
   OR NOT (gold.orders <=> silver.orders)
