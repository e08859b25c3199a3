-- The tables partitioned by created_at (migrations 0016, 0034, 0036): provenance and the tables that
-- follow its rows. Every function that makes, closes or drops partitions fits these alike.
CREATE OR REPLACE FUNCTION public.lineage_partitioned_tables()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT ARRAY['provenance', 'provenance_children', 'invalidation_postings']
$function$;
