-- One step down the tenant's edges, for a walk `walk (depth, frontier, seen)` whose first row
-- is depth 0 with the records it starts from as both frontier and seen: each step expands only
-- the frontier and drops what was seen, so each descendant comes once, at its minimal depth,
-- and diamonds cost their nodes, not their paths. The walk goes one level past :max_depth, so
-- that a frontier left there says the answer was truncated. Takes :'tenant_id', :max_depth.
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
