-- name: bundle_texts
-- The tenant's captured text, for an export bundle that asks for it (--include-text).
--   psql -v tenant_id=default -f sql/bundle_texts.sql
SELECT context_id, text, captured_at
FROM context_text
WHERE tenant_id = :'tenant_id'
ORDER BY context_id;
