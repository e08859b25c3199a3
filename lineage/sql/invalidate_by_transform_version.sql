-- name: invalidate_by_transform_version
-- For a chunker or embedding migration: what depends on anything made by :transform_version
-- (e.g. chunker@1.4), as records. Use kind=answer for the cached answers to drop, kind=summary
-- for the summaries to rebuild, 'any' for all but verdict and tombstone, 'all' for everything.
-- sql/invalidate_ids_by_transform_version.sql lists the same rows as ids, kinds and depths.
-- The invalidation postings list, per key, kind and depth, the records below a record with
-- that key, at the least depth (migration 0034): one range of their b-tree
-- (sql/include/posting_probe.sql) finds the records. A tenant with a record without
-- postings (imported below a parent not stored) is walked down the edges instead, with the same
-- rows. `truncated` says records of the kinds asked for lie deeper than :max_depth.
--   psql -v tenant_id=default -v transform_version=chunker@1.4 -v kind=answer \
--        -v max_depth=20 -f sql/invalidate_by_transform_version.sql
WITH RECURSIVE complete AS MATERIALIZED (
  -- include: postings_complete
    SELECT NOT EXISTS (SELECT 1 FROM provenance AS u
                       WHERE u.tenant_id = :'tenant_id' AND u.upstream_keys IS NULL) AS yes
  -- end include: postings_complete
),
posting_key AS MATERIALIZED (
    -- The number the tenant's postings know the version by (invalidation_keys).
    SELECT k.key_no FROM invalidation_keys AS k
    WHERE k.tenant_id = :'tenant_id' AND k.key = 'transform_version:' || :'transform_version'
),
posted AS MATERIALIZED (
    SELECT posting.context_id, ip.kind, ip.depth
    FROM invalidation_postings AS ip
    CROSS JOIN LATERAL unnest(ip.context_uuids::text[] || ip.context_ids) AS posting (context_id)
    WHERE ip.key_no = (SELECT key_no FROM posting_key)
  -- include: posting_probe
      AND (SELECT yes FROM complete)
      AND ip.tenant_id = :'tenant_id'
      AND (ip.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND ip.kind NOT IN ('verdict', 'tombstone')))
  -- end include: posting_probe
),
deeper AS MATERIALIZED (
    -- Whether postings of the kinds asked for lie past :max_depth: one probe of their b-tree,
    -- not a scan of the answer's rows.
    SELECT EXISTS (SELECT 1 FROM invalidation_postings AS ip
                   WHERE ip.key_no = (SELECT key_no FROM posting_key)
  -- include: posting_probe
      AND (SELECT yes FROM complete)
      AND ip.tenant_id = :'tenant_id'
      AND (ip.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND ip.kind NOT IN ('verdict', 'tombstone')))
  -- end include: posting_probe
                     AND ip.depth > :max_depth) AS yes
),
walk_limit (depth) AS (
    -- Past :max_depth (but for 'all'), to know whether records of the kinds asked lie deeper.
    SELECT CASE WHEN :'kind' = 'all' THEN :max_depth::integer ELSE 2147483646 END
),
walk (depth, frontier, kinds, seen, seen_kinds) AS (
    SELECT 0, start.ids, start.kinds, start.ids, start.kinds
    FROM (SELECT coalesce(array_agg(s.context_id), '{}') AS ids,
                 coalesce(array_agg(s.kind), '{}') AS kinds
          FROM provenance AS s
          WHERE s.tenant_id = :'tenant_id' AND s.transform_version = :'transform_version'
            AND NOT (SELECT yes FROM complete)) AS start
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
-- include: records_in_order
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
-- end include: records_in_order
