-- The API key with this id, looked up before any tenant is known (api_keys is a reference
-- table on Citus). A definer on a fixed search_path with qualified names, so no function or
-- operator the application role planted runs with the owner's rights.
CREATE OR REPLACE FUNCTION public.lineage_key(p_key_id text)
 RETURNS TABLE(tenant_id text, scope text, key_hash bytea, revoked boolean)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT k.tenant_id, k.scope, k.key_hash, k.revoked_at IS NOT NULL
    FROM public.api_keys AS k WHERE k.key_id OPERATOR(pg_catalog.=) p_key_id;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_key(p_key_id text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_key(p_key_id text) TO lineage_app;
