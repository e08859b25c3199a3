-- name: blast_radius
-- Every descendant of the contexts in :context_ids (an array literal: '{ctx_a,ctx_b}') once,
-- at its minimal depth (the starts are depth 0). Walks down the tenant's edge table
-- provenance_children by parent. :kind is a kind, 'any' (every kind but the bookkeeping
-- verdict and tombstone) or 'all'. :max_depth is inclusive; `truncated` is true when
-- descendants lie beyond it; `expired` when a record it reached was dropped by retention. Each
-- step expands only the frontier and drops what was seen, so diamonds cost their nodes, not
-- their paths. Tables are named with their schema: lineage_blast_radius runs this statement
-- as the owner with only pg_catalog on its path.
--   psql -v tenant_id=default -v context_ids='{ctx_...}' -v kind=answer -v max_depth=20 \
--        -f sql/blast_radius.sql
WITH RECURSIVE walk_limit (depth) AS (SELECT :max_depth::integer),
walk (depth, frontier, kinds, seen, seen_kinds) AS (
  -- include: walk_down_from_ids
    SELECT 0, start.ids, start.kinds, start.ids, start.kinds
    -- The stored ones with their kinds, and those retention dropped (still leaves of the log;
    -- no kind, as no record): their edges to the children kept are kept with the children.
    FROM (SELECT coalesce(array_agg(wanted.id), '{}') AS ids,
                 coalesce(array_agg(p.kind), '{}') AS kinds
          FROM unnest(:'context_ids'::text[]) AS wanted (id)
          LEFT JOIN public.provenance AS p
                 ON p.tenant_id = :'tenant_id' AND p.context_id = wanted.id
          WHERE p.context_id IS NOT NULL
             OR EXISTS (SELECT 1 FROM public.log_leaves AS l
                        WHERE l.tenant_id = :'tenant_id' AND l.context_id = wanted.id)) AS start
  -- end include: walk_down_from_ids
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
SELECT r.context_id, w.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes,
       coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                 WHERE b.depth = :max_depth + 1), false) AS truncated,
       -- A record the walk started from was dropped by retention (its month expired): every
       -- edge lives in its child's month, so a child reached is a child stored.
       (SELECT array_position(b.kinds, NULL) IS NOT NULL FROM walk AS b
        WHERE b.depth = 0) AS expired
FROM walk AS w
CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
-- Only the records of the kind asked for are read, each once.
JOIN public.provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = node.id
WHERE w.depth <= :max_depth
  AND (node.kind = :'kind' OR :'kind' = 'all'
       OR (:'kind' = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
ORDER BY w.depth, r.context_id COLLATE "C";
