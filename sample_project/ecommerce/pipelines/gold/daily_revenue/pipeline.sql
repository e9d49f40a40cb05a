-- Grain is one row per order_date and category. Revenue counts every order that was not cancelled;
-- returned orders are reported separately and subtracted in net_revenue.
WITH orders AS (
    SELECT
        o.order_id,
        o.customer_id,
        o.order_date,
        o.quantity,
        o.amount,
        o.status,
        coalesce(p.category, 'unknown') AS category
    FROM {{ ref('silver.clean_orders') }} AS o
    LEFT JOIN {{ ref('silver.product_catalog') }} AS p
        ON o.product_id = p.product_id
    WHERE o.status <> 'cancelled'
)
SELECT
    order_date,
    category,
    COUNT(*) AS order_count,
    COUNT(DISTINCT customer_id) AS customer_count,
    CAST(SUM(quantity) AS BIGINT) AS units_sold,
    CAST(SUM(amount) AS DECIMAL(14, 2)) AS gross_revenue,
    CAST(SUM(CASE WHEN status = 'returned' THEN amount ELSE 0 END) AS DECIMAL(14, 2)) AS returned_revenue,
    CAST(SUM(CASE WHEN status <> 'returned' THEN amount ELSE 0 END) AS DECIMAL(14, 2)) AS net_revenue
FROM orders
GROUP BY order_date, category
