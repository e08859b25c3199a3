-- name: retention_policy_get
-- The retention period (months; null keeps everything) and each partition of provenance kept,
-- oldest first, with its bounds (-infinity and infinity for MINVALUE and MAXVALUE).
--   psql -f sql/retention_policy_get.sql
SELECT r.keep_months, r.updated_at,
       ARRAY(SELECT p.partition FROM lineage_partitions('provenance') AS p) AS partitions,
       ARRAY(SELECT jsonb_build_object('partition', p.partition, 'from', p.lower, 'to', p.upper)
             FROM lineage_partitions('provenance') AS p) AS bounds
FROM retention_policy AS r;
