-- name: bundle_tenant_rows
-- The tenant's leaves and tree nodes of its log, of which it holds at least as many as the log
-- it exports. The export runs it under EXPLAIN only, for how many rows the planner believes
-- the tenant has (export.stale_statistics): statistics taken while another tenant alone had
-- rows count the tables' rows right, yet take a tenant loaded since for one row, and the
-- export then read every record of the tenant for each leaf (255 s for 50,000 records, 1.9 s
-- once analyzed).
--   psql -v tenant_id=default -f sql/bundle_tenant_rows.sql
SELECT 'log_leaves' AS table_name, count(*) AS tenant_rows
FROM log_leaves WHERE tenant_id = :'tenant_id'
UNION ALL
SELECT 'log_nodes', count(*) FROM log_nodes WHERE tenant_id = :'tenant_id';
