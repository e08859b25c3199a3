-- name: invalidate_by_embedding_model
-- For an embedding migration: what depends on the chunks :embedding_model embedded, as records.
-- An embedding is its chunk's child (kind embedding, produced_by the model; from spans, also
-- transform_version embedding@<model>), so the walk starts from the chunks with an embedding
-- child by that model. A chunk embedded by several models reaches the answers of each: a
-- retrieval names its chunks, not the index it searched. :kind is a kind (answer, summary,
-- ...), 'any' (all but verdict and tombstone) or 'all'.
--   psql -v tenant_id=default -v embedding_model=text-embedding-ada-002 -v kind=answer \
--        -v max_depth=20 -f sql/invalidate_by_embedding_model.sql
WITH RECURSIVE
-- include: embedding_walk
walk_limit (depth) AS (SELECT :max_depth::integer),
walk (depth, frontier, kinds, seen, seen_kinds) AS (
    SELECT 0, start.ids, start.kinds, start.ids, start.kinds
    FROM (SELECT coalesce(array_agg(s.context_id), '{}') AS ids,
                 coalesce(array_agg(s.kind), '{}') AS kinds
          FROM provenance AS s
          WHERE s.tenant_id = :'tenant_id'
            AND s.context_id IN (SELECT unnest(e.parent_ids) FROM provenance AS e
                                 WHERE e.tenant_id = :'tenant_id' AND e.kind = 'embedding'
                                   AND e.produced_by = :'embedding_model')) AS start
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
)
-- end include: embedding_walk
SELECT r.context_id, w.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes,
       coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                 WHERE b.depth = :max_depth + 1), false) AS truncated,
       -- Retention dropped some of the tenant's records: what derived from them is not found.
       EXISTS (SELECT 1 FROM tenant_expiry AS x WHERE x.tenant_id = :'tenant_id') AS expired
FROM walk AS w
CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
-- Only the records of the kind asked for are read, each once.
JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = node.id
WHERE w.depth <= :max_depth
  AND (node.kind = :'kind' OR :'kind' = 'all'
       OR (:'kind' = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
ORDER BY w.depth, r.context_id COLLATE "C";
