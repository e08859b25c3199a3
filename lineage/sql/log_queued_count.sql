-- name: log_queued_count
-- How many of the tenant's records wait for their leaves: its events past the log's
-- events_logged, how far its newest checkpoint is behind what was appended.
--   psql -v tenant_id=default -f sql/log_queued_count.sql
SELECT count(*) AS queued
FROM events AS e
WHERE e.tenant_id = :'tenant_id'
  AND e.position > coalesce((SELECT h.events_logged FROM log_heads AS h
                             WHERE h.tenant_id = :'tenant_id'), 0);
