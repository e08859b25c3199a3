-- One step down the tenant's edges for an invalidation walk `walk (depth, frontier, kinds,
-- seen, seen_kinds)`, kinds parallel to the ids: each child's kind comes from the edge key's
-- index (migration 0026), so the walk reads no record. Each step expands only the frontier and
-- drops what was seen (a kind is its record's for good, so an id seen is an (id, kind) seen);
-- the walk goes one level past :max_depth, so that a frontier left there says the answer was
-- truncated. Takes :'tenant_id', :max_depth.
  UNION ALL
    SELECT w.depth + 1, step.ids, step.kinds, w.seen || step.ids, w.seen_kinds || step.kinds
    FROM walk AS w
    CROSS JOIN LATERAL (
        -- One aggregate, so the ids and kinds arrays keep one order.
        SELECT coalesce(array_agg(child.id), '{}') AS ids,
               coalesce(array_agg(child.kind), '{}') AS kinds
        FROM (
            -- Children of the frontier, joined to the tenant's edges at this level so row
            -- security is checked once a level (a fenced probe per id re-checked it on every
            -- partition: 0.5 ms an id); a join, never `= ANY (frontier)`, which stale
            -- statistics turn into a filter comparing every edge with the whole frontier.
            SELECT x.context_id, x.kind
            FROM provenance_children AS x
            JOIN unnest(w.frontier) AS parent (id)
              ON x.tenant_id = :'tenant_id' AND x.parent_id = parent.id
            EXCEPT
            SELECT * FROM unnest(w.seen, w.seen_kinds)
        ) AS child (id, kind)
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
