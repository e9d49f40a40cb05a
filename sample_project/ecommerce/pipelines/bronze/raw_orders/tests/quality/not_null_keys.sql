-- Every raw order row needs its identifiers and its version timestamp.
SELECT order_id, customer_id, product_id, updated_at, source_file
FROM {{ this }}
WHERE order_id IS NULL
   OR customer_id IS NULL
   OR product_id IS NULL
   OR updated_at IS NULL
