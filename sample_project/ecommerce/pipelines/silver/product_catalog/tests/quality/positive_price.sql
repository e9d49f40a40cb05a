SELECT product_id, list_price
FROM {{ this }}
WHERE list_price IS NULL OR list_price <= 0
