-- A trace's records, of sql/trace_contexts.sql (its statement, filled in by `python -m
-- lineage.db.include_sql`), in one call, one round trip with no BEGIN or COMMIT, as
-- lineage_walk_back reads: the tenant its token vouches for is checked once and bound for the
-- read alone, and the request's audit row, when given, commits with it.
CREATE OR REPLACE FUNCTION public.lineage_trace_contexts(p_tenant_id text, p_trace_id text, p_token text, p_audit jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(context_id text, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb)
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
    -- statement: trace_contexts
    SELECT r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
           r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
           r.attributes
    FROM public.provenance AS r
    WHERE r.tenant_id = $1 AND r.trace_id = $2
    ORDER BY r.created_at, r.context_id
    -- end statement: trace_contexts
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_trace_contexts(p_tenant_id text, p_trace_id text, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_trace_contexts(p_tenant_id text, p_trace_id text, p_token text, p_audit jsonb) TO lineage_app;
