-- name: stale_sources
-- The freshness check: records derived from a document revision (a root record of kind
-- document) that is no longer the newest
-- for its source_uri. :source_uri narrows to one document ('any' for all); :kind is a kind,
-- 'any' (all but verdict and tombstone) or 'all'. The stale revisions themselves are depth 0.
--   psql -v tenant_id=default -v source_uri=any -v kind=answer -v max_depth=20 \
--        -f sql/stale_sources.sql
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM lineage_descendants(
         :'tenant_id',
         ARRAY(SELECT old.context_id FROM provenance AS old
               WHERE old.tenant_id = :'tenant_id' AND old.kind = 'document'
                 AND old.parent_ids = '{}' AND old.source_uri IS NOT NULL
                 AND (:'source_uri' = 'any' OR old.source_uri = :'source_uri')
                 AND EXISTS (SELECT 1 FROM provenance AS newer
                             WHERE newer.tenant_id = :'tenant_id'
                               AND newer.source_uri = old.source_uri
                               AND newer.kind = 'document' AND newer.parent_ids = '{}'
                               AND (newer.created_at, newer.context_id)
                                   > (old.created_at, old.context_id))),
         :max_depth) AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
WHERE r.kind = :'kind' OR :'kind' = 'all'
   OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone'))
ORDER BY d.depth, r.context_id;
