-- name: bundle_tenant_rows
-- The tenant's records. The export runs it under EXPLAIN only, for how many the planner
-- believes the tenant has (export.stale_statistics): statistics taken while another tenant
-- alone had records count the table's rows right, yet take a tenant bulk-loaded since for one
-- row, and the export then read every record of the tenant for each leaf (255 s for 50,000
-- records, 1.9 s once analyzed). An import analyzes provenance itself.
--   psql -v tenant_id=default -f sql/bundle_tenant_rows.sql
SELECT count(*) AS records FROM provenance WHERE tenant_id = :'tenant_id';
