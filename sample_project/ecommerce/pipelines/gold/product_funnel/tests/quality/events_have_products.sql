-- Referential check: every product seen in the clickstream is in the funnel (i.e. in the catalog).
SELECT e.event_id, e.product_id
FROM {{ ref('bronze.raw_events') }} AS e
LEFT ANTI JOIN {{ this }} AS f
    ON e.product_id = f.product_id
WHERE e.product_id IS NOT NULL
