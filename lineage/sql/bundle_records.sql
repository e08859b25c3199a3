-- name: bundle_records
-- The tenant's log leaves in leaf order up to a tree size, each with the leaf hash the log
-- holds and its record with its stored signature: the body of an export bundle (lineage export
-- bundle). Null record columns: retention dropped the record (its leaf stays in the log);
-- has_kept_children says whether a kept record names it as a parent, and inherited_roots gives
-- such a record the root sources that make its kept children's what they are here (its own
-- rows expired with it): each source that every kept child has, a level above the deepest.
--   psql -v tenant_id=default -v tree_size=100 -f sql/bundle_records.sql
SELECT l.leaf_index, n.hash AS leaf_hash, l.context_id AS leaf_context_id, s.key_id, s.signature,
       p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri, p.content_hash,
       p.transform, p.transform_version, p.produced_by, p.index_snapshot, p.trace_id,
       p.created_at, p.attributes,
       coalesce(kept.children > 0, false) AS has_kept_children,
       coalesce(inherited.roots, '{}') AS inherited_roots
FROM log_leaves AS l
JOIN log_nodes AS n ON n.tenant_id = l.tenant_id AND n.level = 0 AND n.node_index = l.leaf_index
LEFT JOIN provenance AS p ON p.tenant_id = l.tenant_id AND p.context_id = l.context_id
LEFT JOIN record_signatures AS s ON s.tenant_id = p.tenant_id AND s.context_id = p.context_id
LEFT JOIN LATERAL (
    SELECT count(*) AS children
    FROM provenance_children AS c
    WHERE c.tenant_id = :'tenant_id' AND c.parent_id = l.context_id
) AS kept ON p.context_id IS NULL
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(shared.source_uri, shared.depth - 1) AS roots
    FROM (
        SELECT r.source_uri, max(r.depth) AS depth, count(*) AS children
        FROM provenance_children AS c
        JOIN root_sources AS r ON r.tenant_id = c.tenant_id AND r.context_id = c.context_id
        WHERE c.tenant_id = :'tenant_id' AND c.parent_id = l.context_id
        GROUP BY r.source_uri
    ) AS shared
    WHERE shared.children = kept.children
) AS inherited ON kept.children > 0
WHERE l.tenant_id = :'tenant_id' AND l.leaf_index < :tree_size
ORDER BY l.leaf_index;
