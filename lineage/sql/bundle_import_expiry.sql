-- name: bundle_import_expiry
-- An imported tenant takes its bundle's expiry horizon (the records created before it were
-- dropped by retention before the export), so walks that reach into it say so. Owner only.
--   psql -v tenant_id=moved -v expired_before=2024-01-01 -f sql/bundle_import_expiry.sql
INSERT INTO tenant_expiry AS e (tenant_id, expired_before)
VALUES (:'tenant_id', :'expired_before')
ON CONFLICT (tenant_id) DO UPDATE
    SET expired_before = greatest(e.expired_before, excluded.expired_before);
