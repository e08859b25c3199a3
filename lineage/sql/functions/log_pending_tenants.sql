-- The tenants with records queued for the verifiable log: stream positions given past the
-- events its log has taken in (the owner reads every tenant's counter and head).
CREATE OR REPLACE FUNCTION public.log_pending_tenants()
 RETURNS SETOF text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT c.tenant_id
    FROM public.tenant_counters AS c
    LEFT JOIN public.log_heads AS h ON h.tenant_id = c.tenant_id
    WHERE c.counter = 'events' AND c.last_value > coalesce(h.events_logged, 0);
END
$function$;
REVOKE ALL ON FUNCTION public.log_pending_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.log_pending_tenants() TO lineage_app;
