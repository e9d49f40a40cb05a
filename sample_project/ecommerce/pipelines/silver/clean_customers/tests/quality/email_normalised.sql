-- Emails are lower case without blanks, and look like an address; missing ones are NULL, never ''.
SELECT customer_id, email
FROM {{ this }}
WHERE email IS NOT NULL
  AND (email <> lower(trim(email)) OR NOT regexp_like(email, '^[^@ ]+@[^@ ]+[.][a-z]+$'))
