-- Fits the partitions to the retention period: with a period, the open partition is closed at
-- the start of next month (renamed _p_until_YYYY_MM: it expires whole once that month is past
-- the period), or dropped when every table's is empty, and the months ahead are added; without
-- one, an open partition follows the last month. Closing validates the open partition's rows
-- against its new bound, one read of them with appends waiting. Returns what it did.
CREATE OR REPLACE FUNCTION public.lineage_partitions_shape(p_now timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    parents text[] := public.lineage_partitioned_tables();
    keep int := (SELECT r.keep_months FROM public.retention_policy AS r);
    open record;
    parent text;
    anything boolean := false;
    until timestamptz := date_trunc('month', p_now, 'UTC') + interval '1 month';
    closed text := '_p_until_' || to_char(until AT TIME ZONE 'UTC', 'YYYY_MM');
    after timestamptz;
    done jsonb := '{}';
BEGIN
    SELECT p.* INTO open FROM public.lineage_partitions('public.provenance') AS p
    WHERE p.upper = 'infinity';
    IF keep IS NOT NULL AND open.partition IS NOT NULL THEN
        FOREACH parent IN ARRAY parents LOOP
            EXECUTE format('SELECT $1 OR EXISTS (SELECT 1 FROM public.%I)', parent || open.suffix)
                INTO anything USING anything;
        END LOOP;
        FOREACH parent IN ARRAY parents LOOP
            IF anything THEN
                EXECUTE format('ALTER TABLE public.%I DETACH PARTITION public.%I',
                               parent, parent || open.suffix);
                EXECUTE format('ALTER TABLE public.%I RENAME TO %I', parent || open.suffix,
                               parent || closed);
                IF parent = 'provenance' THEN
                    EXECUTE format('ALTER INDEX public.%I RENAME TO %I',
                                   parent || open.suffix || '_id', parent || closed || '_id');
                END IF;
                EXECUTE format('ALTER TABLE public.%I ATTACH PARTITION public.%I '
                               'FOR VALUES FROM (%s) TO (%L)', parent, parent || closed,
                               CASE WHEN open.lower = '-infinity' THEN 'MINVALUE'
                                    ELSE quote_literal(open.lower) END, until);
            ELSE
                EXECUTE format('DROP TABLE public.%I', parent || open.suffix);
            END IF;
        END LOOP;
        done := jsonb_build_object(CASE WHEN anything THEN 'closed' ELSE 'dropped' END,
                                   open.partition, 'until', CASE WHEN anything THEN until END);
    ELSIF keep IS NULL AND open.partition IS NULL THEN
        SELECT coalesce(max(p.upper), '-infinity') INTO after
        FROM public.lineage_partitions('public.provenance') AS p;
        FOREACH parent IN ARRAY parents LOOP
            PERFORM public.lineage_create_partition(parent, parent || '_p_open', after, 'infinity');
        END LOOP;
        done := jsonb_build_object('opened', 'provenance_p_open', 'from', after);
    END IF;
    RETURN done || jsonb_build_object(
        'partitions_added', public.lineage_add_partitions(p_now, p_now + interval '2 months'));
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_partitions_shape(p_now timestamp with time zone) FROM PUBLIC;
