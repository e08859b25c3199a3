-- The tenants with records queued for the verifiable log (log_queue is the owner's).
CREATE OR REPLACE FUNCTION public.log_pending_tenants()
 RETURNS SETOF text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY SELECT DISTINCT q.tenant_id FROM public.log_queue AS q;
END
$function$;
REVOKE ALL ON FUNCTION public.log_pending_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.log_pending_tenants() TO lineage_app;
