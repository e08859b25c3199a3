-- One step up, to the parents, for a walk `walk (depth, frontier, seen)` whose first row is
-- depth 0 with the records it starts from as both frontier and seen: each step expands only
-- the frontier and drops what was seen (EXCEPT hashes both sides), so each ancestor comes
-- once, at its minimal depth, and diamonds cost their nodes, not their paths. The walk goes
-- one level past :max_depth, so that a frontier left there says the answer was truncated.
-- Takes :'tenant_id', :max_depth.
  UNION ALL
    SELECT w.depth + 1, step.ids, w.seen || step.ids
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT ARRAY(
            -- Upward: parents of the frontier, found by primary key.
            SELECT parent.id
            FROM provenance AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
            WHERE c.tenant_id = :'tenant_id' AND c.context_id = ANY (w.frontier)
            EXCEPT
            SELECT unnest(w.seen)
        ) AS ids
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
