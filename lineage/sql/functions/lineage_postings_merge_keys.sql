-- Merge the tenant's small postings rows under the keys numbered p_keys. Each append writes a
-- row per key, kind, depth and month, so a key that gains a record in every append (a popular
-- document, the current chunker) gains a row of a few ids each time: its invalidation read then
-- visits a row per few ids, and each row stores its tenant, key, kind, depth and index entry
-- again. Where such a group holds at least 8 rows of fewer than 100 ids, they are replaced, in
-- this transaction, by rows of 1,000 ids of each form in id order (the last holds the rest),
-- dated by the group's earliest, so in the same month partition: the same ids under the same
-- key, kind and depth, which is all a read sees. A row of 100 ids or more is left as it is (its
-- fixed part is a byte an id or less, and rewriting it each round would write more than it
-- saves), and so is a group of fewer small rows until more come. What a concurrent append
-- writes is not deleted: only the rows a group's DELETE saw are, and exactly those are written
-- again. One merge a tenant at a time (an advisory lock taken without waiting: a second caller
-- gets NULLs). Returns the rows deleted and the rows written. On Citus, lineage_postings_merge
-- runs it on the tenant's worker.
CREATE OR REPLACE FUNCTION public.lineage_postings_merge_keys(p_tenant text, p_keys integer[])
 RETURNS TABLE(rows_merged bigint, rows_written bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    g record;
    gone bigint;
    first_at timestamptz;
    uuids uuid[];
    ids text[];
    deleted bigint := 0;
    written bigint := 0;
    added bigint;
BEGIN
    -- Taken again by lineage_postings_merge's own session, which holds it already.
    IF NOT pg_try_advisory_xact_lock(hashtextextended('postings_merge/' || p_tenant, 0)) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    FOR g IN
        -- A group's month as a range of created_at (UTC months, as partitions and appends
        -- have them), so the DELETE compares plain values (Citus takes no STABLE function of a
        -- column in a write).
        SELECT s.key_no, s.kind, s.depth, s.month AT TIME ZONE 'UTC' AS first,
               (s.month + interval '1 month') AT TIME ZONE 'UTC' AS past
        FROM unnest(p_keys) AS k (key_no)
        CROSS JOIN LATERAL (
            SELECT ip.key_no, ip.kind, ip.depth,
                   date_trunc('month', ip.created_at AT TIME ZONE 'UTC') AS month
            FROM public.invalidation_postings AS ip
            WHERE ip.tenant_id = p_tenant AND ip.key_no = k.key_no
              AND coalesce(cardinality(ip.context_uuids), 0)
                  + coalesce(cardinality(ip.context_ids), 0) < 100
            OFFSET 0) AS s
        GROUP BY s.key_no, s.kind, s.depth, s.month
        HAVING count(*) >= 8
    LOOP
        WITH merged AS (
            DELETE FROM public.invalidation_postings AS ip
            WHERE ip.tenant_id = p_tenant AND ip.key_no = g.key_no AND ip.kind = g.kind
              AND ip.depth = g.depth AND ip.created_at >= g.first AND ip.created_at < g.past
              AND coalesce(cardinality(ip.context_uuids), 0)
                  + coalesce(cardinality(ip.context_ids), 0) < 100
            RETURNING ip.created_at, ip.context_uuids, ip.context_ids
        )
        SELECT (SELECT count(*) FROM merged), (SELECT min(m.created_at) FROM merged AS m),
               (SELECT array_agg(u.id ORDER BY u.id::text)
                FROM merged AS m CROSS JOIN LATERAL unnest(m.context_uuids) AS u (id)),
               (SELECT array_agg(t.id ORDER BY t.id)
                FROM merged AS m CROSS JOIN LATERAL unnest(m.context_ids) AS t (id))
        INTO gone, first_at, uuids, ids;
        CONTINUE WHEN gone = 0;
        INSERT INTO public.invalidation_postings (tenant_id, key_no, kind, depth, created_at,
                                                  context_uuids, context_ids)
        SELECT p_tenant, g.key_no, g.kind, g.depth, first_at,
               nullif(uuids[s.first:s.first + 999], '{}'), nullif(ids[s.first:s.first + 999], '{}')
        FROM generate_series(1, greatest(cardinality(uuids), cardinality(ids)), 1000) AS s (first);
        GET DIAGNOSTICS added = ROW_COUNT;
        deleted := deleted + gone;
        written := written + added;
    END LOOP;
    RETURN QUERY SELECT deleted, written;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_postings_merge_keys(p_tenant text, p_keys integer[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_postings_merge_keys(p_tenant text, p_keys integer[]) TO lineage_app;
