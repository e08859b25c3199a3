-- name: event_horizon
-- Where a live event stream without Last-Event-ID starts: the tenant's newest position, so
-- the records appended after it are the new ones (see events_after).
--   psql -v tenant_id=default -f sql/event_horizon.sql
SELECT coalesce(max(position), 0) AS position FROM events WHERE tenant_id = :'tenant_id';
