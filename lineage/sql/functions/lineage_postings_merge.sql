-- Merge the small postings rows of the keys that the tenant's next p_records records (stream
-- positions past its 'postings_merged' counter) are posted under (lineage_postings_merge_keys),
-- and move the counter past them. One merge a tenant at a time (an advisory lock taken without
-- waiting: a second caller returns at once, zeros, and moves nothing). Returns the records
-- passed, the rows deleted and the rows written. Distributed by p_tenant.
CREATE OR REPLACE FUNCTION public.lineage_postings_merge(p_tenant text, p_records integer)
 RETURNS TABLE(records bigint, rows_merged bigint, rows_written bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    merged_through bigint;
    through bigint;
    touched integer[];
    merged record;
BEGIN
    IF p_records IS NULL OR p_records < 1 THEN
        RAISE EXCEPTION 'p_records must be a positive number of records, not %', p_records
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtextextended('postings_merge/' || p_tenant, 0)) THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    merged_through := coalesce((SELECT c.last_value FROM public.tenant_counters AS c
                                WHERE c.tenant_id = p_tenant AND c.counter = 'postings_merged'),
                               0);
    through := (SELECT least(c.last_value, merged_through + p_records)
                FROM public.tenant_counters AS c
                WHERE c.tenant_id = p_tenant AND c.counter = 'events');
    IF through IS NULL OR through <= merged_through THEN
        RETURN QUERY SELECT 0::bigint, 0::bigint, 0::bigint;
        RETURN;
    END IF;

    -- The keys the records are posted under: their upstream keys and root sources, by number.
    SELECT coalesce(array_agg(DISTINCT k.key_no), '{}') INTO touched
    FROM public.events AS e
    CROSS JOIN LATERAL (SELECT p.upstream_keys, p.root_sources FROM public.provenance AS p
                        WHERE p.tenant_id = p_tenant AND p.context_id = e.context_id
                        OFFSET 0) AS p
    CROSS JOIN LATERAL unnest(coalesce(p.upstream_keys, '{}') || coalesce(p.root_sources, '{}'))
        AS k (key_no)
    WHERE e.tenant_id = p_tenant AND e.position > merged_through AND e.position <= through;
    SELECT * INTO merged FROM public.lineage_postings_merge_keys(p_tenant, touched);

    INSERT INTO public.tenant_counters AS c (tenant_id, counter, last_value)
    VALUES (p_tenant, 'postings_merged', through)
    ON CONFLICT (tenant_id, counter) DO UPDATE SET last_value = excluded.last_value;
    RETURN QUERY SELECT through - merged_through, merged.rows_merged, merged.rows_written;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_postings_merge(p_tenant text, p_records integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_postings_merge(p_tenant text, p_records integer) TO lineage_app;
