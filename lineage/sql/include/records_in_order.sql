-- The end of an invalidation's records, after its `posted`, `deeper` and `walk` (walk_down)
-- and before nothing: the answer's ids in order, then each record read by primary key in that
-- order. Sorting the ids, not the records, keeps the sort small (the records of 212,500 answers
-- spilled 55 MB to disk). Takes :'tenant_id', :'kind', :max_depth.
found AS (
    -- Each record the postings list under the key, at the depth they give.
    SELECT p.context_id, p.depth,
           (SELECT yes FROM deeper) AS truncated,
           EXISTS (SELECT 1 FROM tenant_expiry AS x WHERE x.tenant_id = :'tenant_id') AS expired
    FROM posted AS p
    WHERE p.depth <= :max_depth
  UNION ALL
    -- The walk's rows, where some record has no postings.
    SELECT node.id, w.depth,
           EXISTS (SELECT 1 FROM walk AS b
                   CROSS JOIN LATERAL unnest(b.frontier, b.kinds) AS node (id, kind)
                   WHERE b.depth > :max_depth
                     AND (node.kind = :'kind' OR :'kind' = 'all'
                          OR (:'kind' = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))),
           -- Retention dropped some of the tenant's records: what derived from them is not found.
           EXISTS (SELECT 1 FROM tenant_expiry AS x WHERE x.tenant_id = :'tenant_id')
    FROM walk AS w
    CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
    -- Only the records of the kind asked for are read, each once.
    WHERE w.depth <= :max_depth
      AND (node.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
)
SELECT r.context_id, f.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes, f.truncated, f.expired
FROM (SELECT * FROM found ORDER BY depth, context_id COLLATE "C") AS f
CROSS JOIN LATERAL (
    SELECT * FROM provenance AS x
    WHERE x.tenant_id = :'tenant_id' AND x.context_id = f.context_id
    OFFSET 0  -- a primary-key probe per id, in the ids' order
) AS r
ORDER BY f.depth, f.context_id COLLATE "C";
