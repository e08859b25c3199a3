-- name: bundle_import_settings
-- An imported tenant takes its bundle's capture switches and text hash key, so its keyed
-- hashes still match their texts. Owner only; run on a tenant that has no records yet.
UPDATE tenant_settings
SET capture_source_text = :'capture_source_text', capture_query_text = :'capture_query_text',
    capture_answer_text = :'capture_answer_text', text_hash_key = :'text_hash_key'
WHERE tenant_id = :'tenant_id'
RETURNING tenant_id;
