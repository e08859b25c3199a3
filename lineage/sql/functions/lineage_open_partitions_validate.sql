-- Validates the checks lineage_open_partitions_check added: one read of every open partition's
-- rows under SHARE UPDATE EXCLUSIVE, which appends do not wait for. Returns the partitions read.
CREATE OR REPLACE FUNCTION public.lineage_open_partitions_validate()
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    open record;
    parent text;
    validated int := 0;
BEGIN
    SELECT p.* INTO open FROM public.lineage_partitions('public.provenance') AS p
    WHERE p.upper = 'infinity';
    IF open.partition IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH parent IN ARRAY public.lineage_partitioned_tables() LOOP
        EXECUTE format('ALTER TABLE public.%I VALIDATE CONSTRAINT %I',
                       parent || open.suffix, parent || open.suffix || '_closing');
        validated := validated + 1;
    END LOOP;
    RETURN validated;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_open_partitions_validate() FROM PUBLIC;
