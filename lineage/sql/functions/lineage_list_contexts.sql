-- A page of records matching the filters of sql/list_contexts.sql (its statement, filled in by
-- `python -m lineage.db.include_sql`) in one call, one round trip with no BEGIN or COMMIT, as
-- lineage_walk_back reads: the tenant its token vouches for is checked once and bound for the
-- read alone, and the request's audit row, when given, commits with it. Planned for each
-- call's values: a filter given as 'any' folds away only in a custom plan, and a generic one
-- ran every filter against each record of the tenant.
CREATE OR REPLACE FUNCTION public.lineage_list_contexts(p_tenant_id text, p_kind text, p_source_uri text, p_trace_id text, p_produced_by text, p_session_id text, p_since timestamp with time zone, p_until timestamp with time zone, p_after_created_at timestamp with time zone, p_after_context_id text, p_page_size bigint, p_token text, p_audit jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(context_id text, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: list_contexts
    SELECT r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
           r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
           r.attributes
    FROM public.provenance AS r
    WHERE r.tenant_id = $1
      AND ($2 IN ('any', 'all') OR r.kind = $2)
      AND ($3 = 'any' OR r.source_uri = $3)
      AND ($4 = 'any' OR r.trace_id = $4)
      AND ($5 = 'any' OR r.produced_by = $5)
      AND ($6 = 'any' OR r.attributes ->> 'session_id' = $6)
      AND $7::timestamptz < $8::timestamptz AND r.created_at < $8::timestamptz
      AND (r.created_at, r.context_id)
          > (greatest($9::timestamptz, $7::timestamptz),
             CASE WHEN $9::timestamptz >= $7::timestamptz
                  THEN $10::text ELSE '' END)
    ORDER BY r.created_at, r.context_id
    LIMIT $11
    -- end statement: list_contexts
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_list_contexts(p_tenant_id text, p_kind text, p_source_uri text, p_trace_id text, p_produced_by text, p_session_id text, p_since timestamp with time zone, p_until timestamp with time zone, p_after_created_at timestamp with time zone, p_after_context_id text, p_page_size bigint, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_list_contexts(p_tenant_id text, p_kind text, p_source_uri text, p_trace_id text, p_produced_by text, p_session_id text, p_since timestamp with time zone, p_until timestamp with time zone, p_after_created_at timestamp with time zone, p_after_context_id text, p_page_size bigint, p_token text, p_audit jsonb) TO lineage_app;
