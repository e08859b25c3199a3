-- name: log_queued_count
-- How many of the tenant's records wait in the queue for their leaves: how far its newest
-- checkpoint is behind what was appended.
--   psql -v tenant_id=default -f sql/log_queued_count.sql
SELECT count(*) AS queued
FROM log_queue
WHERE tenant_id = :'tenant_id';
