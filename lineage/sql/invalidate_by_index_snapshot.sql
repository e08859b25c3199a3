-- name: invalidate_by_index_snapshot
-- For an index migration: what depends on anything built or served from :index_snapshot.
-- :kind is a kind (answer, summary, ...), 'any' (all but verdict and tombstone) or 'all'.
--   psql -v tenant_id=default -v index_snapshot=idx_2026_08_01 -v kind=answer \
--        -v max_depth=20 -f sql/invalidate_by_index_snapshot.sql
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM lineage_descendants(
         :'tenant_id',
         ARRAY(SELECT s.context_id FROM provenance AS s
               WHERE s.tenant_id = :'tenant_id' AND s.index_snapshot = :'index_snapshot'),
         :max_depth) AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
WHERE r.kind = :'kind' OR :'kind' = 'all'
   OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone'))
ORDER BY d.depth, r.context_id;
