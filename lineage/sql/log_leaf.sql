-- name: log_leaf
-- A record with its leaf index in the tenant's log (no row: unknown id; a null leaf_index:
-- appended but not yet sequenced; null record columns: retention dropped the record, and its
-- leaf stays in the log).
--   psql -v tenant_id=default -v context_id=answer_1 -f sql/log_leaf.sql
SELECT l.leaf_index, p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri,
       p.content_hash, p.transform, p.transform_version, p.produced_by, p.index_snapshot,
       p.trace_id, p.created_at, p.attributes
FROM provenance AS p
LEFT JOIN log_leaves AS l ON l.tenant_id = p.tenant_id AND l.context_id = p.context_id
WHERE p.tenant_id = :'tenant_id' AND p.context_id = :'context_id'
UNION ALL
SELECT l.leaf_index, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL
FROM log_leaves AS l
WHERE l.tenant_id = :'tenant_id' AND l.context_id = :'context_id'
  AND NOT EXISTS (SELECT 1 FROM provenance AS kept
                  WHERE kept.tenant_id = :'tenant_id' AND kept.context_id = :'context_id');
