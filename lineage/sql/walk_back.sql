-- name: walk_back
-- Every ancestor of :context_id once, at its minimal depth (the start is depth 0), with its
-- parent_ids (the edges) and what made it. Walks up by primary key, reading each record once;
-- :max_depth is inclusive; `truncated` is true when ancestors lie beyond it; `expired` when
-- retention dropped some. Each step expands only the frontier and drops what was seen (EXCEPT
-- hashes both sides), so diamonds cost their nodes, not their paths. One statement confined to the tenant, so Citus sends it whole to the tenant's shard.
-- Tables are named with their schema: lineage_walk_back runs this statement as the owner with
-- only pg_catalog on its path.
--   psql -v tenant_id=default -v context_id=ctx_... -v max_depth=20 -f sql/walk_back.sql
WITH RECURSIVE walk (depth, frontier, seen, found) AS (
    -- No records found yet, typed as the table's rows (on Citus, as its shard's)
    SELECT 0, ARRAY[:'context_id'], ARRAY[:'context_id'],
           ARRAY(SELECT c FROM public.provenance AS c WHERE c.tenant_id = :'tenant_id' AND false)
  -- include: walk_up
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
  -- end include: walk_up
)
-- Each row holds the records of the frontier before it, read once; expired: the walk reached an
-- id retention has dropped (its month expired), so fewer records are found than ids reached,
-- and the ancestors above it are unknown. An id not stored finds nothing.
SELECT r.context_id, a.depth - 1 AS depth, r.kind, r.parent_ids, r.source_uri, r.content_hash,
       r.transform, r.transform_version, r.produced_by, r.index_snapshot, r.trace_id,
       r.created_at, r.attributes,
       coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                 WHERE b.depth = :max_depth + 1), false) AS truncated,
       count(*) OVER () < (SELECT sum(cardinality(b.frontier)) FROM walk AS b
                           WHERE b.depth <= :max_depth) AS expired
FROM walk AS a
CROSS JOIN LATERAL unnest(a.found) AS r
ORDER BY a.depth, r.context_id COLLATE "C";
