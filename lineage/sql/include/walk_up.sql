-- One step up, to the parents, for a walk `walk (depth, frontier, seen, found)` whose first
-- row is depth 0 with the ids it starts from as both frontier and seen and no records found:
-- each step reads the frontier's records once (row depth + 1 holds those of depth's frontier,
-- so the walk's answer needs no second read of them), expands only the frontier and drops
-- what was seen (EXCEPT hashes both sides), so each ancestor comes once, at its minimal depth,
-- and diamonds cost their nodes, not their paths. The walk goes one level past :max_depth, so
-- that a frontier left there says the answer was truncated. Takes :'tenant_id', :max_depth.
  UNION ALL
    SELECT w.depth + 1, step.ids, w.seen || step.ids, step.found
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT level.found, ARRAY(
            -- Upward: parents of the frontier's records, found by primary key.
            SELECT parent.id
            FROM unnest(level.found) AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
            EXCEPT
            SELECT unnest(w.seen)
        ) AS ids
        FROM (SELECT ARRAY(SELECT c FROM public.provenance AS c
                           WHERE c.tenant_id = :'tenant_id' AND c.context_id = ANY (w.frontier))
                     AS found
              OFFSET 0) AS level
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
