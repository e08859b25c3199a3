-- name: stored_parents
-- Which of these records the tenant has stored, each with what a child's append derives from
-- it: its root sources from the side table root_sources (a row per source, or one row with a
-- null source_uri when it has none: a record inserted around the append) and its invalidation
-- postings (NULL when unknown: a parent of its was not stored). The append checks a batch's
-- parents with it.
-- Driven by the ids, one primary-key probe each: `p.context_id = ANY (...)` here let the
-- planner prefer a parallel scan of provenance for a batch's thousand parents.
-- root_sources rows carry their record's created_at, so joining on it prunes the probe to the
-- record's own month partition instead of the id index of every month.
--   psql -v tenant_id=default -v context_ids='{answer_1}' -f sql/stored_parents.sql
SELECT p.context_id, r.source_uri, r.depth, p.upstream_keys, p.upstream_depths
FROM unnest(:'context_ids'::text[]) AS wanted (context_id)
JOIN provenance AS p ON p.tenant_id = :'tenant_id' AND p.context_id = wanted.context_id
LEFT JOIN root_sources AS r
    ON r.tenant_id = :'tenant_id' AND r.context_id = p.context_id AND r.created_at = p.created_at;
