-- name: tenant_settings_text_hash_key
-- The tenant's secret key for HMAC-SHA256 hashes of query, claim and answer texts. The
-- service reads it to key hashes and to check texts against them; no endpoint returns it.
--   psql -v tenant_id=default -f sql/tenant_settings_text_hash_key.sql
SELECT text_hash_key
FROM tenant_settings
WHERE tenant_id = :'tenant_id';
