-- The records by id of sql/get_contexts.sql (its statement, filled in by `python -m
-- lineage.db.include_sql`) in one call, one round trip with no BEGIN or COMMIT, as
-- lineage_walk_back reads: the tenant its token vouches for is checked once and bound for the
-- read alone, and the request's audit row, when given, commits with it.
CREATE OR REPLACE FUNCTION public.lineage_get_contexts(p_tenant_id text, p_context_ids text[], p_token text, p_audit jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(tenant_id text, context_id text, parent_ids text[], kind text, source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb)
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
    -- statement: get_contexts
    SELECT tenant_id, context_id, parent_ids, kind, source_uri, content_hash, transform,
           transform_version, produced_by, index_snapshot, trace_id, created_at, attributes
    FROM public.provenance
    WHERE tenant_id = $1 AND context_id = ANY ($2::text[])
    -- end statement: get_contexts
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_get_contexts(p_tenant_id text, p_context_ids text[], p_token text, p_audit jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_get_contexts(p_tenant_id text, p_context_ids text[], p_token text, p_audit jsonb) TO lineage_app;
