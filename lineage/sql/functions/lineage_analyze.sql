-- ANALYZE one of lineage_statistics_tables() as its owner, or return false after 100 ms if
-- a lock conflicts (retention's partition DDL, another ANALYZE or VACUUM): a refresh never waits
-- in the lock queue, where requests would queue behind it; on Citus, on the workers that
-- analyze the shards neither. One table a call, so its lock is held for its own ANALYZE only.
CREATE OR REPLACE FUNCTION public.lineage_analyze(p_table text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '100ms'
AS $function$
BEGIN
    IF p_table IS NULL OR NOT p_table = ANY (public.lineage_statistics_tables()) THEN
        RAISE EXCEPTION 'the service analyzes only %', public.lineage_statistics_tables()
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        -- On Citus, the workers that analyze the shards give up after lock_timeout too.
        PERFORM set_config('citus.propagate_set_commands', 'local', true);
        SET LOCAL lock_timeout = '100ms';
    END IF;
    EXECUTE format('ANALYZE public.%I', p_table);
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_analyze(p_table text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_analyze(p_table text) TO lineage_app;
