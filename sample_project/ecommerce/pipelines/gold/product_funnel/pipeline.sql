-- @merge_strategy: full_refresh
-- @description: Per product views, add-to-carts, orders and revenue, with the view-to-cart rate
-- @tags: daily, marketing

WITH funnel_events AS (
    SELECT
        product_id,
        COUNT_IF(event_type = 'page_view') AS page_views,
        COUNT_IF(event_type = 'add_to_cart') AS add_to_carts,
        COUNT(DISTINCT CASE WHEN event_type = 'page_view' THEN session_id END) AS viewing_sessions
    FROM {{ ref('bronze.raw_events') }}
    WHERE product_id IS NOT NULL
    GROUP BY product_id
),
sales AS (
    SELECT
        product_id,
        COUNT(*) AS orders,
        SUM(quantity) AS units_sold,
        SUM(amount) AS revenue
    FROM {{ ref('silver.clean_orders') }}
    WHERE status <> 'cancelled'
    GROUP BY product_id
)
SELECT
    p.product_id,
    p.sku,
    p.product_name,
    p.category,
    p.is_active,
    coalesce(e.page_views, 0) AS page_views,
    coalesce(e.viewing_sessions, 0) AS viewing_sessions,
    coalesce(e.add_to_carts, 0) AS add_to_carts,
    coalesce(s.orders, 0) AS orders,
    CAST(coalesce(s.units_sold, 0) AS BIGINT) AS units_sold,
    CAST(coalesce(s.revenue, 0) AS DECIMAL(14, 2)) AS revenue,
    CAST(try_divide(e.add_to_carts, e.page_views) AS DECIMAL(6, 4)) AS view_to_cart_rate
FROM {{ ref('silver.product_catalog') }} AS p
LEFT JOIN funnel_events AS e
    ON p.product_id = e.product_id
LEFT JOIN sales AS s
    ON p.product_id = s.product_id
