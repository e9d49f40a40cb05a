-- @merge_strategy: full_refresh
-- @description: Orders as they land, every file of the zone
SELECT * FROM {{ landing_zone('orders') }}
