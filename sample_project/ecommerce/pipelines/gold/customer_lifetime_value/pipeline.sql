-- @merge_strategy: full_refresh

-- Lifetime value counts orders that were kept (placed, shipped, delivered): cancelled and returned
-- orders bring no money. Every customer gets a row, customers without orders land in tier 'none'.
WITH order_stats AS (
    SELECT
        customer_id,
        COUNT(*) AS orders_total,
        COUNT_IF(status IN ('placed', 'shipped', 'delivered')) AS orders_kept,
        COUNT_IF(status = 'returned') AS orders_returned,
        SUM(CASE WHEN status IN ('placed', 'shipped', 'delivered') THEN amount ELSE 0 END) AS kept_amount,
        MIN(order_date) AS first_order_date,
        MAX(order_date) AS last_order_date
    FROM {{ ref('silver.clean_orders') }}
    GROUP BY customer_id
),
joined AS (
    SELECT
        c.customer_id,
        c.email,
        c.country,
        c.signup_date,
        coalesce(s.orders_total, 0) AS orders_total,
        coalesce(s.orders_kept, 0) AS orders_kept,
        coalesce(s.orders_returned, 0) AS orders_returned,
        CAST(coalesce(s.kept_amount, 0) AS DECIMAL(14, 2)) AS lifetime_value,
        s.first_order_date,
        s.last_order_date
    FROM {{ ref('silver.clean_customers') }} AS c
    LEFT JOIN order_stats AS s
        ON c.customer_id = s.customer_id
)
SELECT
    customer_id,
    email,
    country,
    signup_date,
    orders_total,
    orders_kept,
    orders_returned,
    lifetime_value,
    CAST(lifetime_value / NULLIF(orders_kept, 0) AS DECIMAL(12, 2)) AS avg_order_value,
    first_order_date,
    last_order_date,
    CASE
        WHEN lifetime_value >= 2000 THEN 'high'
        WHEN lifetime_value >= 500 THEN 'medium'
        WHEN lifetime_value > 0 THEN 'low'
        ELSE 'none'
    END AS value_tier
FROM joined
