-- The first row of a walk down from the records in :'context_ids', for `walk (depth, frontier,
-- kinds, seen, seen_kinds) AS (...)` before include/walk_down.sql: depth 0, the ids found as
-- frontier and seen. Takes :'tenant_id', :'context_ids'.
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
