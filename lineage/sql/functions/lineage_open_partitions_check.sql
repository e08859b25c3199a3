-- Readies every open partition to be closed at the start of next month without its rows read
-- with appends waiting: drops the check a run left (an interrupted `lineage retention set`),
-- then with p_add adds CHECK the bound it is to have, NOT VALID (a brief lock, no read), which
-- lineage_open_partitions_validate validates while appends go on and the ATTACH in
-- lineage_partitions_shape trusts instead of reading the rows. Returns the partitions changed.
CREATE OR REPLACE FUNCTION public.lineage_open_partitions_check(p_now timestamp with time zone, p_add boolean)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    open record;
    parent text;
    until timestamptz := date_trunc('month', p_now, 'UTC') + interval '1 month';
    changed int := 0;
BEGIN
    SELECT p.* INTO open FROM public.lineage_partitions('public.provenance') AS p
    WHERE p.upper = 'infinity';
    IF open.partition IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH parent IN ARRAY public.lineage_partitioned_tables() LOOP
        EXECUTE format('ALTER TABLE public.%I DROP CONSTRAINT IF EXISTS %I',
                       parent || open.suffix, parent || open.suffix || '_closing');
        IF p_add THEN
            EXECUTE format('ALTER TABLE public.%I ADD CONSTRAINT %I '
                           'CHECK (created_at >= %L AND created_at < %L) NOT VALID',
                           parent || open.suffix, parent || open.suffix || '_closing',
                           open.lower, until);
        END IF;
        changed := changed + 1;
    END LOOP;
    RETURN changed;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_open_partitions_check(p_now timestamp with time zone, p_add boolean) FROM PUBLIC;
