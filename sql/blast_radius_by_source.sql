-- name: blast_radius_by_source
-- The blast radius of a document: every record with :source_uri (all its revisions) and
-- everything derived from them, each once. For right-to-be-forgotten deletes and cache
-- invalidation. :kind is a kind, 'any' (all but verdict and tombstone) or 'all'.
--   psql -v tenant_id=default -v source_uri=s3://policies/contractors.md -v kind=any \
--        -v max_depth=20 -f sql/blast_radius_by_source.sql
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM lineage_descendants(
         :'tenant_id',
         ARRAY(SELECT s.context_id FROM provenance AS s
               WHERE s.tenant_id = :'tenant_id' AND s.source_uri = :'source_uri'),
         :max_depth) AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
WHERE r.kind = :'kind' OR :'kind' = 'all'
   OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone'))
ORDER BY d.depth, r.context_id;
