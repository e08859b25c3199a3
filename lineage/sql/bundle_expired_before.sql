-- name: bundle_expired_before
-- The time before which retention dropped the tenant's records (no row: it dropped none), read
-- by an export after its records, so the bundle's expiry note states what its leaves show.
--   psql -v tenant_id=default -f sql/bundle_expired_before.sql
SELECT expired_before FROM tenant_expiry WHERE tenant_id = :'tenant_id';
