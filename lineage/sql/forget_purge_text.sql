-- name: forget_purge_text
-- Right to be forgotten: deletes the captured text of these records. Only context_text
-- loses rows; provenance, which holds no text, stays append-only. Returns the ids purged.
--   psql -v tenant_id=default -v context_ids='{summary_1,claim_1}' -f sql/forget_purge_text.sql
DELETE FROM context_text
WHERE tenant_id = :'tenant_id' AND context_id = ANY (:'context_ids'::text[])
RETURNING context_id;
