-- name: stored_parents
-- Which of these records the tenant has stored, each with what a child's append derives from
-- it: its root sources (NULL for a record inserted around the append) and its invalidation
-- postings (NULL when unknown: a parent of its was not stored), both kept on the record by
-- their numbers in invalidation_keys (key_names names them). The append checks a batch's
-- parents with it.
-- Driven by the ids, one primary-key probe each (OFFSET 0 keeps the subquery apart), whatever
-- the statistics say: `p.context_id = ANY (...)` here let the planner prefer a parallel scan of
-- provenance for a batch's thousand parents.
--   psql -v tenant_id=default -v context_ids='{answer_1}' -f sql/stored_parents.sql
SELECT p.context_id, p.root_sources, p.root_depths, p.upstream_keys, p.upstream_depths
FROM unnest(:'context_ids'::text[]) AS wanted (context_id)
CROSS JOIN LATERAL (
    SELECT p.context_id, p.root_sources, p.root_depths, p.upstream_keys, p.upstream_depths
    FROM provenance AS p
    WHERE p.tenant_id = :'tenant_id' AND p.context_id = wanted.context_id
    OFFSET 0
) AS p;
