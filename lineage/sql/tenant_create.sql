-- name: tenant_create
-- A new tenant and its settings row (text capture off; a fresh key for keyed text hashes).
-- Run as the owner: the application role cannot create tenants.
--   psql -v tenant_id=acme -f sql/tenant_create.sql
WITH tenant AS (
    INSERT INTO tenants (tenant_id) VALUES (:'tenant_id')
    ON CONFLICT DO NOTHING
    RETURNING tenant_id
)
INSERT INTO tenant_settings (tenant_id)
SELECT tenant_id FROM tenant
RETURNING tenant_id
