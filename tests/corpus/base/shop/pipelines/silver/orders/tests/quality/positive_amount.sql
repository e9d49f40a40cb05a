-- @severity: warn
SELECT * FROM {{ this }} WHERE amount <= 0
