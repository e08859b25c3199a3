-- name: claim_text
-- The captured text of these records in one tenant, with each record's content hash so the
-- reader can check the text is the one recorded: the premises and claims verification judges.
--   psql -v tenant_id=default -v context_ids='{summary_1,claim_1}' -f sql/claim_text.sql
SELECT t.context_id, t.text, p.content_hash
FROM context_text AS t
JOIN provenance AS p ON p.tenant_id = t.tenant_id AND p.context_id = t.context_id
WHERE t.tenant_id = :'tenant_id' AND t.context_id = ANY (:'context_ids'::text[]);
