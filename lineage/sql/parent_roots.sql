-- name: parent_roots
-- For each record in :context_ids, the roots it derives from (records without parents, itself
-- when it is one) and their source_uri: which documents a record's text came from.
--   psql -v tenant_id=default -v context_ids='{chunk_17,chunk_42}' -v max_depth=20 \
--        -f sql/parent_roots.sql
WITH RECURSIVE up (origin, context_id, depth) AS (
    -- Each record's ancestors up to :max_depth above it, found by primary key, itself included.
    SELECT p.context_id, p.context_id, 0
    FROM provenance AS p
    WHERE p.tenant_id = :'tenant_id' AND p.context_id = ANY (:'context_ids'::text[])
  UNION
    SELECT u.origin, parent.id, u.depth + 1
    FROM up AS u
    JOIN provenance AS c ON c.tenant_id = :'tenant_id' AND c.context_id = u.context_id
    CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
    WHERE u.depth < :max_depth
)
SELECT DISTINCT u.origin AS context_id, r.context_id AS root_id, r.source_uri
FROM up AS u
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = u.context_id
WHERE r.parent_ids = '{}'
ORDER BY 1, 2;
