-- name: blast_radius
-- Every descendant of the contexts in :context_ids (an array literal: '{ctx_a,ctx_b}') once,
-- at its minimal depth (the starts are depth 0). Walks down through the GIN index on
-- parent_ids. :kind is a kind, 'any' (every kind but the bookkeeping verdict and tombstone)
-- or 'all'. :max_depth is inclusive; `truncated` is true when descendants lie beyond it.
--   psql -v tenant_id=default -v context_ids='{ctx_...}' -v kind=answer -v max_depth=20 \
--        -f sql/blast_radius.sql
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM lineage_descendants(:'tenant_id', :'context_ids'::text[], :max_depth) AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
WHERE r.kind = :'kind' OR :'kind' = 'all'
   OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone'))
ORDER BY d.depth, r.context_id;
