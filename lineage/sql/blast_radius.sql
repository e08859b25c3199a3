-- name: blast_radius
-- Every descendant of the contexts in :context_ids (an array literal: '{ctx_a,ctx_b}') once,
-- at its minimal depth (the starts are depth 0). Walks down the tenant's edge table
-- provenance_children by primary key. :kind is a kind, 'any' (every kind but the bookkeeping
-- verdict and tombstone) or 'all'. :max_depth is inclusive; `truncated` is true when
-- descendants lie beyond it; `expired` when a record it reached was dropped by retention. Each
-- step expands only the frontier and drops what was seen, so diamonds cost their nodes, not
-- their paths.
--   psql -v tenant_id=default -v context_ids='{ctx_...}' -v kind=answer -v max_depth=20 \
--        -f sql/blast_radius.sql
WITH RECURSIVE walk (depth, frontier, seen) AS (
    SELECT 0, start.ids, start.ids
    -- The stored ones, and those retention dropped (still leaves of the log): their edges to
    -- the children kept are kept with the children.
    FROM (SELECT ARRAY(SELECT wanted.id FROM unnest(:'context_ids'::text[]) AS wanted (id)
                       WHERE EXISTS (SELECT 1 FROM provenance AS p
                                     WHERE p.tenant_id = :'tenant_id' AND p.context_id = wanted.id)
                          OR EXISTS (SELECT 1 FROM log_leaves AS l
                                     WHERE l.tenant_id = :'tenant_id'
                                       AND l.context_id = wanted.id)) AS ids) AS start
  -- include: walk_down
  UNION ALL
    SELECT w.depth + 1, step.ids, w.seen || step.ids
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT ARRAY(
            -- Downward: children of the frontier, one probe of the tenant's edges per id
            -- (kept so whatever the statistics: a new tenant's rows look few until ANALYZE).
            SELECT e.context_id
            FROM unnest(w.frontier) AS parent (id)
            CROSS JOIN LATERAL (
                SELECT x.context_id FROM provenance_children AS x
                WHERE x.tenant_id = :'tenant_id' AND x.parent_id = parent.id
                OFFSET 0
            ) AS e
            EXCEPT
            SELECT unnest(w.seen)
        ) AS ids
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
  -- end include: walk_down
)
SELECT found.*
FROM (
    -- Joined, not left-joined, to the records, so row security is checked once, above the
    -- join, not on every probe; expired: a record the walk reached was dropped by retention
    -- (its month expired), so fewer records are found than ids reached.
    SELECT r.context_id, d.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash,
           r.transform, r.transform_version, r.produced_by, r.index_snapshot, r.trace_id,
           r.created_at, r.attributes,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = :max_depth + 1), false) AS truncated,
           count(*) OVER () < (SELECT sum(cardinality(b.frontier)) FROM walk AS b
                               WHERE b.depth <= :max_depth) AS expired
    FROM walk AS d
    CROSS JOIN LATERAL unnest(d.frontier) AS node (id)
    JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = node.id
    WHERE d.depth <= :max_depth
) AS found
WHERE found.kind = :'kind' OR :'kind' = 'all'
   OR (:'kind' = 'any' AND found.kind NOT IN ('verdict', 'tombstone'))
ORDER BY found.depth, found.context_id;
