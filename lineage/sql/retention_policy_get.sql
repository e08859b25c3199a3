-- name: retention_policy_get
-- The retention period (months; null keeps everything) and each provenance month partition
-- kept, oldest first.
--   psql -f sql/retention_policy_get.sql
SELECT r.keep_months, r.updated_at,
       ARRAY(SELECT c.relname::text FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'provenance'::regclass ORDER BY c.relname) AS partitions
FROM retention_policy AS r;
