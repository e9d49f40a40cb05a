-- Known event types only; product events carry a product, search and checkout do not.
SELECT event_id, event_type, product_id
FROM {{ this }}
WHERE event_ts IS NULL
   OR event_type IS NULL
   OR event_type NOT IN ('page_view', 'add_to_cart', 'checkout', 'search')
   OR (event_type IN ('page_view', 'add_to_cart') AND product_id IS NULL)
