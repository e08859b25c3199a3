-- The tenants with records whose postings the background round has not merged yet: stream
-- positions given past the tenant's 'postings_merged' counter (the owner reads every tenant's
-- counters).
CREATE OR REPLACE FUNCTION public.lineage_postings_pending()
 RETURNS SETOF text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN QUERY
    SELECT c.tenant_id
    FROM public.tenant_counters AS c
    LEFT JOIN public.tenant_counters AS m
           ON m.tenant_id = c.tenant_id AND m.counter = 'postings_merged'
    WHERE c.counter = 'events' AND c.last_value > coalesce(m.last_value, 0);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_postings_pending() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_postings_pending() TO lineage_app;
