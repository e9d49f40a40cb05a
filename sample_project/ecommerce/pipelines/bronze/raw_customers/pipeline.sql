-- @merge_strategy: full_refresh
-- @description: Customer master file as delivered
-- @tags: ingest, customers

SELECT
    customer_id,
    email,
    first_name,
    last_name,
    country,
    signup_date,
    CAST('{{ run_started_at }}' AS TIMESTAMP) AS ingested_at
FROM {{ landing_zone('customers') }}
