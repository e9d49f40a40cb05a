-- @merge_strategy: full_refresh
SELECT * FROM {{ landing_zone('products') }}
