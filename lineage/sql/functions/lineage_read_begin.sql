-- What each one-call read (lineage_walk_back, lineage_get_contexts, lineage_trace_contexts) does
-- before its statement: refuses a token that does not vouch for the tenant, binds the tenant
-- for the transaction, writes the request's audit row when given (p_audit: sql/audit_append.sql's
-- values but the tenant's), and returns the tenant setting it found, for the read to put back.
-- Only the owner's functions call it: no role is granted it.
CREATE OR REPLACE FUNCTION public.lineage_read_begin(p_tenant_id text, p_token text, p_audit jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    found_bound text := pg_catalog.current_setting('lineage.tenant_id', true);
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant_id, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant_id, true);
    IF p_audit IS NOT NULL THEN
        PERFORM public.lineage_audit_append(
            p_tenant_id, (p_audit ->> 'at')::timestamptz, p_audit ->> 'key_id',
            p_audit ->> 'action', p_audit ->> 'target', p_audit -> 'detail');
    END IF;
    RETURN found_bound;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_read_begin(p_tenant_id text, p_token text, p_audit jsonb) FROM PUBLIC;
