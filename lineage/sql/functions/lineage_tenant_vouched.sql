-- Whether p_token is the service's HMAC of p_tenant. Both sides are hashed before they are
-- compared, so the comparison's time says nothing about the expected token. A Citus worker
-- added after `lineage distribute` ran has no copy of the key: it refuses, saying so (a 503).
CREATE OR REPLACE FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    pads record;
BEGIN
    IF to_regclass('public.tenant_vouching_key') IS NULL THEN
        RAISE EXCEPTION 'this node (port %) has no tenant vouching key', current_setting('port')
            USING ERRCODE = 'operator_intervention',
                  HINT = 'run `lineage distribute` after adding a worker (runbooks/scale-out.md)';
    END IF;
    SELECT k.inner_pad, k.outer_pad INTO pads FROM public.tenant_vouching_key AS k;
    IF pads IS NULL OR p_token IS NULL THEN
        RETURN false;
    END IF;
    RETURN sha256(convert_to(p_token, 'UTF8')) OPERATOR(pg_catalog.=) sha256(convert_to(
        encode(sha256(pads.outer_pad OPERATOR(pg_catalog.||) sha256(
            pads.inner_pad OPERATOR(pg_catalog.||) convert_to(p_tenant, 'UTF8'))), 'hex'),
        'UTF8'));
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text) TO lineage_app;
