-- A document's blast radius as ids, for `WITH RECURSIVE ... radius (context_id, kind, depth,
-- truncated)`: every record with :'source_uri' (all its revisions) and everything derived from
-- them, each once, of :'kind' (a kind, 'any' for all but verdict and tombstone, or 'all'), down
-- to :max_depth, nearest first. When every record with the source is a root the append wrote
-- (its root sources known), it is one index range of the postings under 'source:' and the
-- source_uri; otherwise (a derived record carries the source_uri too, or the roots were
-- inserted around lineage_append) it is the walk down the edges. Both give the same rows.
-- Takes :'tenant_id', :'source_uri', :'kind', :max_depth.
posting_key AS MATERIALIZED (
    -- The number the tenant's postings know the source by (invalidation_keys).
    SELECT k.key_no FROM invalidation_keys AS k
    WHERE k.tenant_id = :'tenant_id' AND k.key = 'source:' || :'source_uri'
),
start AS MATERIALIZED (
    -- Every record with the source, and whether it is a root with its postings.
    SELECT s.context_id, s.kind, s.parent_ids = '{}' AND s.root_sources IS NOT NULL AS root
    FROM provenance AS s
    WHERE s.tenant_id = :'tenant_id' AND s.source_uri = :'source_uri'
),
roots_only AS MATERIALIZED (
    -- No record with the source left (retention dropped them): the kept postings.
    SELECT coalesce(bool_and(start.root), true) AS yes FROM start
),
walk_limit (depth) AS (SELECT :max_depth::integer),
walk (depth, frontier, kinds, seen, seen_kinds) AS (
    -- Only when a record with the source is not a known root: the walk down the edges.
    SELECT 0, ids.ids, ids.kinds, ids.ids, ids.kinds
    FROM (SELECT coalesce(array_agg(start.context_id), '{}') AS ids,
                 coalesce(array_agg(start.kind), '{}') AS kinds FROM start) AS ids
    WHERE NOT (SELECT yes FROM roots_only)
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
),
radius AS (
    -- Each branch lists its rows in order, and only one of them has rows, so no sort of the
    -- whole: the postings key (source, kind, depth) reads a kind's rows depth by depth, and
    -- only each depth's ids are sorted, so the nearest go out before the deepest are read.
    (SELECT posting.context_id, ip.kind, ip.depth,
            -- Truncated when records of the kinds asked for lie deeper than :max_depth: one
            -- probe past the listed range, evaluated once.
            EXISTS (SELECT 1 FROM invalidation_postings AS deeper
                    WHERE deeper.tenant_id = :'tenant_id'
                      AND deeper.key_no = (SELECT key_no FROM posting_key)
                      AND (deeper.kind = :'kind' OR :'kind' = 'all'
                           OR (:'kind' = 'any' AND deeper.kind NOT IN ('verdict', 'tombstone')))
                      AND deeper.depth > :max_depth) AS truncated
     FROM invalidation_postings AS ip
     CROSS JOIN LATERAL unnest(ip.context_uuids::text[] || ip.context_ids) AS posting (context_id)
     WHERE (SELECT yes FROM roots_only)
       AND ip.tenant_id = :'tenant_id' AND ip.key_no = (SELECT key_no FROM posting_key)
       AND (ip.kind = :'kind' OR :'kind' = 'all'
            OR (:'kind' = 'any' AND ip.kind NOT IN ('verdict', 'tombstone')))
       AND ip.depth <= :max_depth
     ORDER BY ip.depth, posting.context_id COLLATE "C")
  UNION ALL
    (SELECT node.id, node.kind, w.depth,
            coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                      WHERE b.depth = :max_depth + 1), false)
     FROM walk AS w
     CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
     WHERE w.depth <= :max_depth
       AND (node.kind = :'kind' OR :'kind' = 'all'
            OR (:'kind' = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
     ORDER BY w.depth, node.id COLLATE "C")
)
