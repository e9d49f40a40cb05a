-- @severity: error
SELECT order_id, count(*) AS n FROM {{ this }} GROUP BY order_id HAVING count(*) > 1
