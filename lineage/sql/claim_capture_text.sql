-- name: claim_capture_text
-- Stores opt-in text (context_text, never provenance) for records of one tenant, given as
-- parallel arrays of ids and texts. Ids with no record in the tenant are skipped; a record
-- already captured keeps its text. Returns the ids newly captured.
--   psql -v tenant_id=default -v context_ids='{summary_1}' \
--        -v texts='{"Contractors get the same notice as employees: 30 days."}' \
--        -f sql/claim_capture_text.sql
INSERT INTO context_text (tenant_id, context_id, text)
SELECT p.tenant_id, p.context_id, t.text
FROM unnest(:'context_ids'::text[], :'texts'::text[]) AS t (context_id, text)
JOIN provenance AS p ON p.tenant_id = :'tenant_id' AND p.context_id = t.context_id
WHERE t.text IS NOT NULL
ON CONFLICT (tenant_id, context_id) DO NOTHING
RETURNING context_id;
