-- name: blast_radius_by_source
-- The blast radius of a document: every record with :source_uri (all its revisions) and
-- everything derived from them, each once, as records. For right-to-be-forgotten deletes and
-- cache invalidation. :kind is a kind, 'any' (all but verdict and tombstone) or 'all'.
-- lineage_source_radius (migration 0007) finds them: one index range of root_sources when
-- every record with the source is a root, else the walk down parent_ids. Reading each
-- record is most of the time; sql/blast_radius_ids_by_source.sql lists the ids alone.
--   psql -v tenant_id=default -v source_uri=s3://policies/contractors.md -v kind=any \
--        -v max_depth=20 -f sql/blast_radius_by_source.sql
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM lineage_source_radius(:'tenant_id', :'source_uri', :'kind', :max_depth) AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
ORDER BY d.depth, r.context_id;
