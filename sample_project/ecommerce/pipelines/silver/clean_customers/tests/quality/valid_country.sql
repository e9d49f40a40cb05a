-- Countries are two upper-case letters after cleaning.
SELECT customer_id, country
FROM {{ this }}
WHERE country IS NULL
   OR NOT regexp_like(country, '^[A-Z]{2}$')
