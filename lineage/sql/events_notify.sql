-- name: events_notify
-- Wakes the live event streams of a tenant at commit: the payload is the tenant's last
-- position and the tenant, as '<position>:<tenant_id>'. A separate statement that names no
-- table, so that on Citus it runs on the coordinator, where the service LISTENs.
--   psql -v payload='3:default' -f sql/events_notify.sql
SELECT pg_notify('lineage_events', :'payload');
