-- name: event_horizon
-- Where a live event stream without Last-Event-ID starts: every transaction older than this
-- xid has finished, so records from it on are the new ones (see events_after).
--   psql -f sql/event_horizon.sql
SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xid;
