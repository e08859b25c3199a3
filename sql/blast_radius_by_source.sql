-- name: blast_radius_by_source
-- The blast radius of a document: every record with :source_uri (all its revisions) and
-- everything derived from them, each once. For right-to-be-forgotten deletes and cache
-- invalidation. :kind is a kind, 'any' (all but verdict and tombstone) or 'all'.
-- When every record with :source_uri is a root (a document and its revisions) known to
-- root_sources, the answer is one index range of root_sources, which holds each record's
-- minimal depth below the roots of each source; otherwise (a derived record carries the
-- source_uri too, or the roots were inserted around append_records) it is the walk down
-- parent_ids. Both give the same rows.
--   psql -v tenant_id=default -v source_uri=s3://policies/contractors.md -v kind=any \
--        -v max_depth=20 -f sql/blast_radius_by_source.sql
WITH start AS MATERIALIZED (
    SELECT s.context_id,
           s.parent_ids = '{}'
           AND EXISTS (SELECT 1 FROM root_sources AS own
                       WHERE own.tenant_id = :'tenant_id' AND own.source_uri = :'source_uri'
                         AND own.kind = s.kind AND own.context_id = s.context_id) AS root
    FROM provenance AS s
    WHERE s.tenant_id = :'tenant_id' AND s.source_uri = :'source_uri'
),
roots_only AS MATERIALIZED (
    SELECT bool_and(start.root) AS yes FROM start
),
reached AS (
    SELECT rs.context_id, rs.depth,
           EXISTS (SELECT 1 FROM root_sources AS deeper
                   WHERE deeper.tenant_id = :'tenant_id' AND deeper.source_uri = :'source_uri'
                     AND deeper.depth > :max_depth) AS truncated
    FROM root_sources AS rs
    WHERE (SELECT yes FROM roots_only)
      AND rs.tenant_id = :'tenant_id' AND rs.source_uri = :'source_uri'
      AND (rs.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND rs.kind NOT IN ('verdict', 'tombstone')))
  UNION ALL
    SELECT w.context_id, w.depth, w.truncated
    FROM lineage_descendants(:'tenant_id', ARRAY(SELECT start.context_id FROM start),
                             :max_depth) AS w
    WHERE NOT (SELECT yes FROM roots_only)
)
SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, d.truncated
FROM reached AS d
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = d.context_id
WHERE d.depth <= :max_depth
  AND (r.kind = :'kind' OR :'kind' = 'all'
       OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone')))
ORDER BY d.depth, r.context_id;
