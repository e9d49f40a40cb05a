-- @merge_strategy: append_only
-- @watermark_column: event_ts
-- @description: Clickstream events, appended once each (only events newer than the table's latest event_ts)
-- @tags: ingest, events, marketing

WITH events AS (
    SELECT
        event_id,
        CAST(event_ts AS TIMESTAMP) AS event_ts,
        customer_id,
        product_id,
        event_type,
        session_id,
        regexp_extract(input_file_name(), '[^/]+$', 0) AS source_file
    FROM {{ landing_zone('events') }}
)
SELECT *
FROM events
{% if watermark_value %}
WHERE event_ts > TIMESTAMP '{{ watermark_value }}'
{% endif %}
