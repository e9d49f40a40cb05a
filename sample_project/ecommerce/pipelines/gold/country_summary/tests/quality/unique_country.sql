SELECT country, COUNT(*) AS c
FROM {{ this }}
GROUP BY country
HAVING COUNT(*) > 1
