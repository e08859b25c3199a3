-- The tenant's log head, locked until the transaction ends (made at size 0 on first use), for
-- the tenant the token vouches for: the one way to start a log step or a checkpoint, so the
-- application role needs no write on log_heads. Distributed by p_tenant on Citus.
CREATE OR REPLACE FUNCTION public.lineage_log_lock(p_tenant text, p_token text)
 RETURNS TABLE(tree_size bigint, root_hash bytea, updated_at timestamp with time zone)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    RETURN QUERY
    INSERT INTO public.log_heads AS h (tenant_id) VALUES (p_tenant)
    ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = h.tenant_id
    RETURNING h.tree_size, h.root_hash, h.updated_at;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_log_lock(p_tenant text, p_token text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_log_lock(p_tenant text, p_token text) TO lineage_app;
