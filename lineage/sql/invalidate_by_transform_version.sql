-- name: invalidate_by_transform_version
-- For a chunker or embedding migration: what depends on anything made by :transform_version
-- (e.g. chunker@1.4), as records. Use kind=answer for the cached answers to drop, kind=summary
-- for the summaries to rebuild, 'any' for all but verdict and tombstone, 'all' for everything.
-- sql/invalidate_ids_by_transform_version.sql lists the same rows as ids, kinds and depths.
--   psql -v tenant_id=default -v transform_version=chunker@1.4 -v kind=answer \
--        -v max_depth=20 -f sql/invalidate_by_transform_version.sql
WITH RECURSIVE walk (depth, frontier, seen) AS (
    SELECT 0, start.ids, start.ids
    FROM (SELECT ARRAY(SELECT s.context_id FROM provenance AS s
                       WHERE s.tenant_id = :'tenant_id'
                         AND s.transform_version = :'transform_version') AS ids) AS start
  UNION ALL
    SELECT w.depth + 1, step.ids, w.seen || step.ids
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT ARRAY(
            -- Downward: children of the frontier, joined to the tenant's edges at this level
            -- so row security is checked once a level (a fenced probe per id re-checked it on
            -- every partition: 0.5 ms an id); a join, never `= ANY (frontier)`, which stale
            -- statistics turn into a filter comparing every edge with the whole frontier.
            SELECT x.context_id
            FROM provenance_children AS x
            JOIN unnest(w.frontier) AS parent (id)
              ON x.tenant_id = :'tenant_id' AND x.parent_id = parent.id
            EXCEPT
            SELECT unnest(w.seen)
        ) AS ids
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
)
SELECT r.context_id, w.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes,
       coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                 WHERE b.depth = :max_depth + 1), false) AS truncated,
       -- Retention dropped some of the tenant's records: what derived from them is not found.
       EXISTS (SELECT 1 FROM tenant_expiry AS x WHERE x.tenant_id = :'tenant_id') AS expired
FROM walk AS w
CROSS JOIN LATERAL unnest(w.frontier) AS node (id)
-- Each reached record read once, for its kind.
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = node.id
WHERE w.depth <= :max_depth
  AND (r.kind = :'kind' OR :'kind' = 'all'
       OR (:'kind' = 'any' AND r.kind NOT IN ('verdict', 'tombstone')))
ORDER BY w.depth, r.context_id;
