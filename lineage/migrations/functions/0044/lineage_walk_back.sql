-- The walk-back of sql/walk_back.sql (its statement, filled in by `python -m
-- lineage.db.include_sql`) in one call, one round trip with no BEGIN or COMMIT: the tenant its
-- token vouches for is checked once and bound for the walk alone (the setting it found is back
-- when it returns), JIT is off, and the request's audit row (p_audit: sql/audit_append.sql's
-- values but the tenant's), when given, commits with the walk. Row security still confines
-- every read (the tables force it on their owner).
CREATE OR REPLACE FUNCTION public.lineage_walk_back(p_context_id text, p_tenant_id text, p_max_depth integer, p_token text, p_audit jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(context_id text, depth integer, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb, truncated boolean, expired boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: walk_back
    WITH RECURSIVE walk (depth, frontier, seen, found) AS (
        SELECT 0, ARRAY[$1], ARRAY[$1],
               ARRAY(SELECT c FROM public.provenance AS c WHERE c.tenant_id = $2 AND false)
      UNION ALL
        SELECT w.depth + 1, step.ids, w.seen || step.ids, step.found
        FROM walk AS w
        CROSS JOIN LATERAL (
            SELECT level.found, ARRAY(
                SELECT parent.id
                FROM unnest(level.found) AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
                EXCEPT
                SELECT unnest(w.seen)
            ) AS ids
            FROM (SELECT ARRAY(SELECT c FROM public.provenance AS c
                               WHERE c.tenant_id = $2 AND c.context_id = ANY (w.frontier))
                         AS found
                  OFFSET 0) AS level
            OFFSET 0  -- evaluate the step once, not once per use of its result
        ) AS step
        WHERE w.depth <= $3 AND cardinality(w.frontier) > 0
    )
    SELECT r.context_id, a.depth - 1 AS depth, r.kind, r.parent_ids, r.source_uri, r.content_hash,
           r.transform, r.transform_version, r.produced_by, r.index_snapshot, r.trace_id,
           r.created_at, r.attributes,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = $3 + 1), false) AS truncated,
           count(*) OVER () < (SELECT sum(cardinality(b.frontier)) FROM walk AS b
                               WHERE b.depth <= $3) AS expired
    FROM walk AS a
    CROSS JOIN LATERAL unnest(a.found) AS r
    ORDER BY a.depth, r.context_id
    -- end statement: walk_back
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_walk_back(p_context_id text, p_tenant_id text, p_max_depth integer, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_walk_back(p_context_id text, p_tenant_id text, p_max_depth integer, p_token text, p_audit jsonb) TO lineage_app;
