-- name: walk_back
-- Every ancestor of :context_id once, at its minimal depth (the start is depth 0), with its
-- parent_ids (the edges) and what made it. Walks up by primary key; :max_depth is inclusive;
-- `truncated` is true when ancestors lie beyond it.
--   psql -v tenant_id=default -v context_id=ctx_... -v max_depth=20 -f sql/walk_back.sql
SELECT r.context_id, a.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, a.truncated
FROM lineage_ancestors(:'tenant_id', :'context_id', :max_depth) AS a
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = a.context_id
ORDER BY a.depth, r.context_id;
