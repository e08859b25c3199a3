-- name: bundle_tenant_settings
-- What a tenant's records need to keep working elsewhere: its capture switches and the key its
-- query, claim and answer hashes are keyed with. Owner only (the key is never the app's).
--   psql -v tenant_id=default -f sql/bundle_tenant_settings.sql
SELECT capture_source_text, capture_query_text, capture_answer_text, text_hash_key
FROM tenant_settings
WHERE tenant_id = :'tenant_id';
