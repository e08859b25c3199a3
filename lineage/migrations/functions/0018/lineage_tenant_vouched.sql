-- Whether p_token is the service's HMAC of p_tenant. Both sides are hashed before they are
-- compared, so the comparison's time says nothing about the expected token.
CREATE OR REPLACE FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    pads record;
BEGIN
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
