-- Whether some tenant with at least p_from records has grown by p_factor (or shrunk: deleted and
-- made anew) since the service last analyzed: then the statistics misjudge its rows. The counts
-- are the tenants' events counters (records appended), read across tenants as the owner.
CREATE OR REPLACE FUNCTION public.lineage_statistics_due(p_from bigint, p_factor double precision)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    tenants text[];
    counts bigint[];
BEGIN
    -- Read apart from the coordinator's own table: on Citus the counters are distributed.
    SELECT coalesce(array_agg(c.tenant_id), '{}'), coalesce(array_agg(c.last_value), '{}')
    INTO tenants, counts
    FROM public.tenant_counters AS c
    WHERE c.counter = 'events' AND c.last_value >= p_from;
    RETURN EXISTS (
        SELECT 1
        FROM unnest(tenants, counts) AS t (tenant_id, records)
        LEFT JOIN public.statistics_analyzed AS s ON s.tenant = t.tenant_id
        WHERE s.records IS NULL OR t.records >= s.records * p_factor OR t.records < s.records
    );
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_statistics_due(p_from bigint, p_factor double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_statistics_due(p_from bigint, p_factor double precision) TO lineage_app;
