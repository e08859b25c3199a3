-- Remember each tenant's record count as the statistics the service just took know it, for
-- lineage_statistics_due to measure growth from; tenants gone are forgotten.
CREATE OR REPLACE FUNCTION public.lineage_statistics_analyzed()
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    tenants text[];
    counts bigint[];
BEGIN
    SELECT coalesce(array_agg(c.tenant_id), '{}'), coalesce(array_agg(c.last_value), '{}')
    INTO tenants, counts
    FROM public.tenant_counters AS c
    WHERE c.counter = 'events';
    DELETE FROM public.statistics_analyzed AS s WHERE s.tenant <> ALL (tenants);
    -- Upserted: two replicas' rounds may both get here.
    INSERT INTO public.statistics_analyzed AS s (tenant, records, analyzed_at)
    SELECT t.tenant_id, t.records, now()
    FROM unnest(tenants, counts) AS t (tenant_id, records)
    ON CONFLICT (tenant) DO UPDATE SET records = excluded.records, analyzed_at = excluded.analyzed_at;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_statistics_analyzed() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_statistics_analyzed() TO lineage_app;
