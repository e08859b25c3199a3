-- The walk down by id of sql/blast_radius.sql (its statement, filled in by `python -m
-- lineage.db.include_sql`) in one call, one round trip with no BEGIN or COMMIT, as
-- lineage_walk_back reads: the tenant its token vouches for is checked once and bound for the
-- walk alone, and the request's audit row, when given, commits with it. Planned once per
-- session (generic plans): the walk's shape does not depend on its values, and planning it
-- afresh took as long as a typical walk (0.3-0.5 ms against 0.4-1.4 ms).
CREATE OR REPLACE FUNCTION public.lineage_blast_radius(p_max_depth integer, p_context_ids text[], p_tenant_id text, p_kind text, p_token text, p_audit jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(context_id text, depth integer, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb, truncated boolean, expired boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: blast_radius
    WITH RECURSIVE walk_limit (depth) AS (SELECT $1::integer),
    walk (depth, frontier, kinds, seen, seen_kinds) AS (
        SELECT 0, start.ids, start.kinds, start.ids, start.kinds
        FROM (SELECT coalesce(array_agg(wanted.id), '{}') AS ids,
                     coalesce(array_agg(p.kind), '{}') AS kinds
              FROM unnest($2::text[]) AS wanted (id)
              LEFT JOIN public.provenance AS p
                     ON p.tenant_id = $3 AND p.context_id = wanted.id
              WHERE p.context_id IS NOT NULL
                 OR EXISTS (SELECT 1 FROM public.log_leaves AS l
                            WHERE l.tenant_id = $3 AND l.context_id = wanted.id)) AS start
      UNION ALL
        SELECT w.depth + 1, step.ids, step.kinds, w.seen || step.ids, w.seen_kinds || step.kinds
        FROM walk AS w
        CROSS JOIN LATERAL (
            SELECT coalesce(array_agg(child.id), '{}') AS ids,
                   coalesce(array_agg(child.kind), '{}') AS kinds
            FROM (
                SELECT e.context_id, e.kind
                FROM (SELECT md5(id)::uuid FROM unnest(w.frontier) AS id OFFSET 0) AS parent (key)
                CROSS JOIN LATERAL (
                    SELECT coalesce(x.context_uuid::text, x.context_id) AS context_id, x.kind
                    FROM public.provenance_children AS x
                    WHERE x.tenant_id = $3 AND x.parent_key = parent.key
                    OFFSET 0
                ) AS e
                EXCEPT
                SELECT * FROM unnest(w.seen, w.seen_kinds)
            ) AS child (id, kind)
            OFFSET 0  -- evaluate the step once, not once per use of its result
        ) AS step
        WHERE w.depth <= (SELECT depth FROM walk_limit) AND cardinality(w.frontier) > 0
    )
    SELECT r.context_id, w.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
           r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
           r.attributes,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = $1 + 1), false) AS truncated,
           (SELECT array_position(b.kinds, NULL) IS NOT NULL FROM walk AS b
            WHERE b.depth = 0) AS expired
    FROM walk AS w
    CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
    JOIN public.provenance AS r ON r.tenant_id = $3 AND r.context_id = node.id
    WHERE w.depth <= $1
      AND (node.kind = $4 OR $4 = 'all'
           OR ($4 = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
    ORDER BY w.depth, r.context_id
    -- end statement: blast_radius
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_blast_radius(p_max_depth integer, p_context_ids text[], p_tenant_id text, p_kind text, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_blast_radius(p_max_depth integer, p_context_ids text[], p_tenant_id text, p_kind text, p_token text, p_audit jsonb) TO lineage_app;
