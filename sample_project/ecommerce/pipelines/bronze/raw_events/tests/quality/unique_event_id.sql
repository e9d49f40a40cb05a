-- @severity: error
-- The table is append-only: a re-run that appended already-loaded events would duplicate ids here.
SELECT event_id, COUNT(*) AS c
FROM {{ this }}
GROUP BY event_id
HAVING COUNT(*) > 1 OR event_id IS NULL
