SELECT customer_id, orders_total, orders_kept, lifetime_value, value_tier
FROM {{ this }}
WHERE lifetime_value < 0
   OR orders_kept > orders_total
   OR (orders_kept = 0 AND lifetime_value <> 0)
   OR (orders_total > 0 AND first_order_date IS NULL)
   OR value_tier NOT IN ('high', 'medium', 'low', 'none')
