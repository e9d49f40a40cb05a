-- Quantities and prices are positive and amount is exactly quantity * unit_price.
SELECT order_id, quantity, unit_price, amount
FROM {{ this }}
WHERE quantity <= 0
   OR unit_price <= 0
   OR amount <= 0
   OR amount IS NULL
   OR amount <> quantity * unit_price
