-- name: bundle_planned_rows
-- How many rows the planner believes each table that lineage export bundle reads in bulk holds
-- (the sum of its partitions' for a partitioned one; a table that no ANALYZE or VACUUM has seen
-- counts 0). The export refreshes their statistics first (bundle_export_analyze) when they
-- believe fewer rows than the log it exports: after an import or a bulk load, log_leaves was
-- filled by the log's sequencing and never analyzed.
--   psql -f sql/bundle_planned_rows.sql
SELECT t.table_name, sum(greatest(c.reltuples, 0))::bigint AS planned_rows
FROM unnest(ARRAY['log_leaves', 'provenance']) AS t (table_name)
-- pg_partition_tree lists a partitioned table's tree, and nothing for a plain table.
LEFT JOIN LATERAL pg_partition_tree(t.table_name::regclass) AS part ON true
JOIN pg_class AS c ON c.oid = coalesce(part.relid, t.table_name::regclass)
WHERE coalesce(part.isleaf, true)
GROUP BY t.table_name
ORDER BY t.table_name;
