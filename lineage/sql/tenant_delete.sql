-- name: tenant_delete
-- Delete every row of a tenant in every table, and write the receipt (rows per table, last
-- signed checkpoint, time) to operator_audit; returns the receipt. Owner only, irreversible:
-- the CLI asks for the tenant's name first (`lineage tenant delete NAME`). lineage_delete_tenant
-- notifies every service's key cache, which may hold the tenant's keys.
--   psql -v tenant_id=acme -f sql/tenant_delete.sql
SELECT lineage_delete_tenant(:'tenant_id') AS receipt
