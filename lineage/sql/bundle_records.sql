-- name: bundle_records
-- The tenant's logged records in leaf order up to a tree size, each with the leaf hash the log
-- holds and its stored signature: the body of an export bundle (lineage export bundle).
--   psql -v tenant_id=default -v tree_size=100 -f sql/bundle_records.sql
SELECT l.leaf_index, n.hash AS leaf_hash, s.key_id, s.signature,
       p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri, p.content_hash,
       p.transform, p.transform_version, p.produced_by, p.index_snapshot, p.trace_id,
       p.created_at, p.attributes
FROM log_leaves AS l
JOIN provenance AS p ON p.tenant_id = l.tenant_id AND p.context_id = l.context_id
JOIN log_nodes AS n ON n.tenant_id = l.tenant_id AND n.level = 0 AND n.node_index = l.leaf_index
LEFT JOIN record_signatures AS s ON s.tenant_id = p.tenant_id AND s.context_id = p.context_id
WHERE l.tenant_id = :'tenant_id' AND l.leaf_index < :tree_size
ORDER BY l.leaf_index;
