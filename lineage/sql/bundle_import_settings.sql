-- name: bundle_import_settings
-- An imported tenant takes its bundle's capture switches and text hash key, so its keyed
-- hashes still match their texts: the key is registered in tenant_text_keys (the settings' key
-- must be a registered one); bundle_retire_text_keys then retires the tenant's former key.
-- Owner only; run on a tenant that has no records yet.
WITH registered AS (
    INSERT INTO tenant_text_keys (tenant_id, text_hash_key)
    VALUES (:'tenant_id', :'text_hash_key')
    ON CONFLICT DO NOTHING
    RETURNING tenant_id
)
UPDATE tenant_settings
SET capture_source_text = :'capture_source_text', capture_query_text = :'capture_query_text',
    capture_answer_text = :'capture_answer_text', text_hash_key = :'text_hash_key'
WHERE tenant_id = :'tenant_id'
RETURNING tenant_id;
