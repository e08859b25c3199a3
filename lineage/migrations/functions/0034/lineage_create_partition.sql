-- One partition of p_parent over [p_lower, p_upper) (infinities as MINVALUE and MAXVALUE);
-- a provenance partition gets its unique index of ids, which is also its replica identity (a
-- Citus shard move by logical replication needs one; the other tables have primary keys but
-- invalidation_postings, whose rows are replicated whole);
-- UPDATE and TRUNCATE are revoked from the owner there as on the parent.
CREATE OR REPLACE FUNCTION public.lineage_create_partition(p_parent text, p_name text, p_lower timestamp with time zone, p_upper timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I FOR VALUES FROM (%s) TO (%s)',
                   p_name, p_parent,
                   CASE WHEN p_lower = '-infinity' THEN 'MINVALUE' ELSE quote_literal(p_lower) END,
                   CASE WHEN p_upper = 'infinity' THEN 'MAXVALUE' ELSE quote_literal(p_upper) END);
    IF p_parent = 'provenance' THEN
        EXECUTE format('CREATE UNIQUE INDEX %I ON public.%I (tenant_id, context_id)',
                       p_name || '_id', p_name);
        EXECUTE format('ALTER TABLE public.%I REPLICA IDENTITY USING INDEX %I',
                       p_name, p_name || '_id');
    ELSIF p_parent = 'invalidation_postings' THEN
        EXECUTE format('ALTER TABLE public.%I REPLICA IDENTITY FULL', p_name);
    END IF;
    EXECUTE format('REVOKE UPDATE, TRUNCATE ON public.%I FROM PUBLIC, %I', p_name, current_user);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_create_partition(p_parent text, p_name text, p_lower timestamp with time zone, p_upper timestamp with time zone) FROM PUBLIC;
