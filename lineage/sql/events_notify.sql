-- name: events_notify
-- Wakes the live event streams of a tenant at commit: the payload is the tenant's last
-- position and its tag, as '<position>:<tag>' (lineage.services.events.stream_tag: a hash of
-- the tenant's token, so that a LISTEN, which any role may run, reads no tenant's name). A
-- separate statement that names no table, so that on Citus it runs on the coordinator, where
-- the service LISTENs.
--   psql -v payload='3:default' -f sql/events_notify.sql
SELECT pg_notify('lineage_events', :'payload');
