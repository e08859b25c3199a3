-- Month partitions of every partitioned table from p_from's month to p_through's, where no
-- partition covers the month yet (none while the open partition is there); how many it made.
-- The owner's, so the application role can call it on the first append of a month
-- (lineage.store.partitions).
CREATE OR REPLACE FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    month timestamptz := date_trunc('month', p_from, 'UTC');
    parent text;
    added int := 0;
BEGIN
    IF p_through - p_from > interval '100 years' THEN
        RAISE EXCEPTION 'no partitions for % months', p_through - p_from;
    END IF;
    WHILE month <= p_through LOOP
        FOREACH parent IN ARRAY ARRAY['provenance', 'record_signatures', 'provenance_children',
                                      'root_sources'] LOOP
            CONTINUE WHEN EXISTS (
                SELECT 1 FROM public.lineage_partitions(('public.' || parent)::regclass) AS p
                WHERE p.lower < month + interval '1 month' AND p.upper > month);
            PERFORM public.lineage_create_partition(
                parent, parent || '_p' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM'),
                month, month + interval '1 month');
            added := added + 1;
        END LOOP;
        month := month + interval '1 month';
    END LOOP;
    RETURN added;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) TO lineage_app;
