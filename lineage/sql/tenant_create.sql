-- name: tenant_create
-- A new tenant and its settings row (text capture off; a fresh key for keyed text hashes,
-- registered in tenant_text_keys, which holds the settings' key). Run as the owner: the
-- application role cannot create tenants.
--   psql -v tenant_id=acme -f sql/tenant_create.sql
WITH tenant AS (
    INSERT INTO tenants (tenant_id) VALUES (:'tenant_id')
    ON CONFLICT DO NOTHING
    RETURNING tenant_id
), text_key AS (
    -- 244 bits from the server's strong random source (two version-4 UUIDs).
    INSERT INTO tenant_text_keys (tenant_id, text_hash_key)
    SELECT tenant_id,
           sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'))
    FROM tenant
    RETURNING tenant_id, text_hash_key
)
INSERT INTO tenant_settings (tenant_id, text_hash_key)
SELECT tenant_id, text_hash_key FROM text_key
RETURNING tenant_id
