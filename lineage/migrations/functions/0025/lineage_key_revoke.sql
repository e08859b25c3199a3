-- Revoke one of the vouched tenant's keys; a revoked key stays revoked (the first time kept).
-- No row: no such key for this tenant. The key's id is notified on lineage_keys (at commit), which
-- empties every server process's key cache (lineage/services/key_cache.py).
CREATE OR REPLACE FUNCTION public.lineage_key_revoke(p_key_id text)
 RETURNS TABLE(key_id text, revoked_at timestamp with time zone)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    tenant text := public.lineage_vouched_tenant();
BEGIN
    UPDATE public.api_keys AS k SET revoked_at = pg_catalog.now()
    WHERE k.tenant_id OPERATOR(pg_catalog.=) tenant AND k.key_id OPERATOR(pg_catalog.=) p_key_id
      AND k.revoked_at IS NULL;
    RETURN QUERY
    SELECT k.key_id, k.revoked_at FROM public.api_keys AS k
    WHERE k.tenant_id OPERATOR(pg_catalog.=) tenant AND k.key_id OPERATOR(pg_catalog.=) p_key_id;
    IF FOUND THEN  -- a key already revoked too: revoked here before migration 0025, none was told
        PERFORM pg_catalog.pg_notify('lineage_keys', p_key_id);
    END IF;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_key_revoke(p_key_id text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_key_revoke(p_key_id text) TO lineage_app;
