-- name: bundle_import_texts
-- Captured text from a bundle, for records the import has written, with the time it was first
-- captured. Returns the ids written; an id without its record is not.
INSERT INTO context_text (tenant_id, context_id, text, captured_at)
SELECT p.tenant_id, p.context_id, t.text, t.captured_at
FROM unnest(:'context_ids'::text[], :'texts'::text[], :'captured_ats'::timestamptz[])
     AS t (context_id, text, captured_at)
JOIN provenance AS p ON p.tenant_id = :'tenant_id' AND p.context_id = t.context_id
RETURNING context_id;
