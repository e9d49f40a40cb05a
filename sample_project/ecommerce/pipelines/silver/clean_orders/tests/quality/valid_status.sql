SELECT order_id, status
FROM {{ this }}
WHERE status IS NULL
   OR status NOT IN ('placed', 'shipped', 'delivered', 'cancelled', 'returned')
