-- name: invalidate_ids_by_embedding_model
-- What depends on the chunks :embedding_model embedded, as the ids, kinds and depths an
-- embedding migration's re-embedding or cache invalidation job needs: the same rows, in the
-- same order, as sql/invalidate_by_embedding_model.sql, with no record read.
--   psql -v tenant_id=default -v embedding_model=text-embedding-ada-002 -v kind=answer \
--        -v max_depth=20 -f sql/invalidate_ids_by_embedding_model.sql
WITH RECURSIVE
-- include: embedding_walk
walk_limit (depth) AS (SELECT :max_depth::integer),
walk (depth, frontier, kinds, seen, seen_kinds) AS (
    SELECT 0, start.ids, start.kinds, start.ids, start.kinds
    FROM (SELECT coalesce(array_agg(s.context_id), '{}') AS ids,
                 coalesce(array_agg(s.kind), '{}') AS kinds
          FROM provenance AS s
          WHERE s.tenant_id = :'tenant_id'
            AND s.context_id IN (SELECT unnest(e.parent_ids) FROM provenance AS e
                                 WHERE e.tenant_id = :'tenant_id' AND e.kind = 'embedding'
                                   AND e.produced_by = :'embedding_model')) AS start
  -- include: walk_down
  UNION ALL
    SELECT w.depth + 1, step.ids, step.kinds, w.seen || step.ids, w.seen_kinds || step.kinds
    FROM walk AS w
    CROSS JOIN LATERAL (
        -- One aggregate, so the ids and kinds arrays keep one order.
        SELECT coalesce(array_agg(child.id), '{}') AS ids,
               coalesce(array_agg(child.kind), '{}') AS kinds
        FROM (
            -- Downward: children of the frontier, one probe of the tenant's edges per id
            -- (kept so whatever the statistics: a new tenant's rows look few until ANALYZE,
            -- and a join over the frontier then became a scan of every edge of the tenant).
            -- Each parent's edge key made apart (OFFSET 0): a cast is not leakproof, so in
            -- the probe row security would keep it out of the index condition.
            SELECT e.context_id, e.kind
            FROM (SELECT md5(id)::uuid FROM unnest(w.frontier) AS id OFFSET 0) AS parent (key)
            CROSS JOIN LATERAL (
                SELECT coalesce(x.context_uuid::text, x.context_id) AS context_id, x.kind
                FROM public.provenance_children AS x
                WHERE x.tenant_id = :'tenant_id' AND x.parent_key = parent.key
                OFFSET 0
            ) AS e
            EXCEPT
            SELECT * FROM unnest(w.seen, w.seen_kinds)
        ) AS child (id, kind)
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= (SELECT depth FROM walk_limit) AND cardinality(w.frontier) > 0
  -- end include: walk_down
)
-- end include: embedding_walk
SELECT node.id AS context_id, node.kind, w.depth,
       coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                 WHERE b.depth = :max_depth + 1), false) AS truncated,
       -- Retention dropped some of the tenant's records: what derived from them is not found.
       EXISTS (SELECT 1 FROM tenant_expiry AS x WHERE x.tenant_id = :'tenant_id') AS expired
FROM walk AS w
CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
-- No record is read: the kinds came with the edges, and a child reached is a child stored.
WHERE w.depth <= :max_depth
  AND (node.kind = :'kind' OR :'kind' = 'all'
       OR (:'kind' = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
ORDER BY w.depth, node.id COLLATE "C";
