-- A version cannot predate the order it describes.
SELECT order_id, order_date, updated_at
FROM {{ this }}
WHERE CAST(updated_at AS DATE) < order_date
