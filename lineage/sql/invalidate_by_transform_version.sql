-- name: invalidate_by_transform_version
-- For a chunker or embedding migration: what depends on anything made by :transform_version
-- (e.g. chunker@1.4). Use kind=answer for the cached answers to drop, kind=summary for the
-- summaries to rebuild, 'any' for all but verdict and tombstone, 'all' for everything.
--   psql -v tenant_id=default -v transform_version=chunker@1.4 -v kind=answer \
--        -v max_depth=20 -f sql/invalidate_by_transform_version.sql
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM lineage_descendants(
         :'tenant_id',
         ARRAY(SELECT s.context_id FROM provenance AS s
               WHERE s.tenant_id = :'tenant_id' AND s.transform_version = :'transform_version'),
         :max_depth) AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
WHERE r.kind = :'kind' OR :'kind' = 'all'
   OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone'))
ORDER BY d.depth, r.context_id;
