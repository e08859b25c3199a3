-- name: tenant_settings_get
-- A tenant's text capture switches, all off until an admin opts in (never its text hash key).
--   psql -v tenant_id=default -f sql/tenant_settings_get.sql
SELECT tenant_id, capture_source_text, capture_query_text, capture_answer_text
FROM tenant_settings
WHERE tenant_id = :'tenant_id';
