-- @merge_strategy: incremental
-- @unique_key: customer_id

-- Upserts every customer of the master file on customer_id (no watermark, the file is a full export).
SELECT
    CAST(customer_id AS INT) AS customer_id,
    NULLIF(lower(trim(email)), '') AS email,
    trim(first_name) AS first_name,
    trim(last_name) AS last_name,
    upper(trim(country)) AS country,
    CAST(signup_date AS DATE) AS signup_date
FROM {{ ref('bronze.raw_customers') }}
