-- One step down the tenant's edges, for a walk `walk (depth, frontier, kinds, seen,
-- seen_kinds)` whose first row is depth 0 with the records it starts from, and their kinds, as
-- both frontier and seen: each step expands only the frontier and drops what was seen, so each
-- descendant comes once, at its minimal depth, and diamonds cost their nodes, not their paths.
-- Each child's kind comes from the edge key's index (migration 0026), so a walk reads no record
-- to learn it (a kind is its record's for good: an id seen is an (id, kind) seen). The walk
-- goes one level past the depth in `walk_limit (depth)`, a CTE of the query (:max_depth, or
-- deeper where the query must know what lies below it), so that a frontier left there says
-- the answer was truncated. Tables are named with their schema, for lineage_blast_radius (only
-- pg_catalog on its path). Takes :'tenant_id'.
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
