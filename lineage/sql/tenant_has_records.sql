-- name: tenant_has_records
-- Whether the tenant holds any record: an import writes only into a tenant that holds none.
--   psql -v tenant_id=default -f sql/tenant_has_records.sql
SELECT EXISTS (SELECT 1 FROM provenance WHERE tenant_id = :'tenant_id') AS has_records;
