-- name: log_leaf
-- A record with its leaf index in the tenant's log (no row: unknown id; a null leaf_index:
-- appended but not yet sequenced).
--   psql -v tenant_id=default -v context_id=answer_1 -f sql/log_leaf.sql
SELECT l.leaf_index, p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri,
       p.content_hash, p.transform, p.transform_version, p.produced_by, p.index_snapshot,
       p.trace_id, p.created_at, p.attributes
FROM provenance AS p
LEFT JOIN log_leaves AS l ON l.tenant_id = p.tenant_id AND l.context_id = p.context_id
WHERE p.tenant_id = :'tenant_id' AND p.context_id = :'context_id';
