SELECT order_id, customer_id, product_id, order_date, updated_at
FROM {{ this }}
WHERE order_id IS NULL
   OR customer_id IS NULL
   OR product_id IS NULL
   OR order_date IS NULL
   OR updated_at IS NULL
