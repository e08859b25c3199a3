-- Month partitions of every partitioned table from p_from's month to p_through's, those missing
-- only. Each provenance partition gets its unique index of ids; UPDATE and TRUNCATE are revoked
-- from the owner there as on the parent. The owner's, so the application role can call it on
-- the first append of a month (lineage.store.partitions).
CREATE OR REPLACE FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    month timestamptz := date_trunc('month', p_from, 'UTC');
    parent text;
    partition text;
    added int := 0;
BEGIN
    IF p_through - p_from > interval '100 years' THEN
        RAISE EXCEPTION 'no partitions for % months', p_through - p_from;
    END IF;
    WHILE month <= p_through LOOP
        FOREACH parent IN ARRAY ARRAY['provenance', 'record_signatures', 'provenance_children',
                                      'root_sources'] LOOP
            partition := parent || '_p' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM');
            CONTINUE WHEN to_regclass('public.' || partition) IS NOT NULL;
            EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I '
                           'FOR VALUES FROM (%L) TO (%L)',
                           partition, parent, month, month + interval '1 month');
            IF parent = 'provenance' THEN
                EXECUTE format('CREATE UNIQUE INDEX %I ON public.%I (tenant_id, context_id)',
                               partition || '_id', partition);
            END IF;
            EXECUTE format('REVOKE UPDATE, TRUNCATE ON public.%I FROM PUBLIC, %I',
                           partition, current_user);
            added := added + 1;
        END LOOP;
        month := month + interval '1 month';
    END LOOP;
    RETURN added;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) TO lineage_app;
