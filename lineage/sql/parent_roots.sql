-- name: parent_roots
-- For each record in :context_ids, the roots it derives from (records without parents, itself
-- when it is one) and their source_uri: which documents a record's text came from.
--   psql -v tenant_id=default -v context_ids='{chunk_17,chunk_42}' -v max_depth=20 \
--        -f sql/parent_roots.sql
SELECT start.id AS context_id, r.context_id AS root_id, r.source_uri
FROM unnest(:'context_ids'::text[]) AS start (id)
CROSS JOIN LATERAL lineage_ancestors(:'tenant_id', start.id, :max_depth) AS a
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = a.context_id
WHERE r.parent_ids = '{}'
ORDER BY 1, 2;
