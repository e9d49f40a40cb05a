-- @merge_strategy: full_refresh
SELECT status, count(*) AS orders, sum(amount) AS revenue
FROM {{ ref('silver.orders') }}
GROUP BY status
