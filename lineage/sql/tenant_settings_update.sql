-- name: tenant_settings_update
-- Turns a tenant's text capture switches on or off; NULL keeps a switch as it is. The
-- application role may update tenant_settings, but its text_hash_key only to the tenant's
-- registered key (tenant_text_keys, which the owner alone writes): in effect, never.
--   psql -v tenant_id=default -v capture_source_text=true -v capture_query_text=false \
--        -v capture_answer_text=true -f sql/tenant_settings_update.sql
UPDATE tenant_settings
SET capture_source_text = coalesce(:'capture_source_text'::boolean, capture_source_text),
    capture_query_text = coalesce(:'capture_query_text'::boolean, capture_query_text),
    capture_answer_text = coalesce(:'capture_answer_text'::boolean, capture_answer_text)
WHERE tenant_id = :'tenant_id'
RETURNING tenant_id, capture_source_text, capture_query_text, capture_answer_text;
