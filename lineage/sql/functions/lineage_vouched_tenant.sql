-- The tenant a definer function acts for: the transaction's, vouched for whoever the caller.
CREATE OR REPLACE FUNCTION public.lineage_vouched_tenant()
 RETURNS text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF coalesce(tenant, '') = ''
       OR NOT public.lineage_tenant_vouched(tenant, current_setting('lineage.tenant_token', true))
    THEN
        RAISE EXCEPTION 'lineage.tenant_id is not set or not vouched for by lineage.tenant_token'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN tenant;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_vouched_tenant() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_vouched_tenant() TO lineage_app;
