-- The tables whose statistics the service refreshes as tenants grow (lineage.services.statistics):
-- those a tenant's walks, appends and log sequencing plan on by tenant_id. Planned on statistics
-- taken before a tenant had records, its rows looked like one and its walk-back read every record
-- of the tenant at each level.
CREATE OR REPLACE FUNCTION public.lineage_statistics_tables()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT ARRAY['provenance', 'provenance_children', 'invalidation_postings', 'events',
                 'log_queue', 'log_leaves', 'log_nodes']
$function$;
REVOKE ALL ON FUNCTION public.lineage_statistics_tables() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_statistics_tables() TO lineage_app;
