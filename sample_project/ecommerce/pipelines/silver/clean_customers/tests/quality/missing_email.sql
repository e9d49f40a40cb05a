-- @severity: warn
-- Customers we cannot email. Expected on the sample data (about 1% of the master file):
-- reported as a warning, the run still merges.
SELECT customer_id, first_name, last_name, country
FROM {{ this }}
WHERE email IS NULL
