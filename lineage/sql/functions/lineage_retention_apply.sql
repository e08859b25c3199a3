-- Expire what the retention policy says, in one transaction: for each partition wholly older
-- than keep_months (a month, or what was stored before the period was set: _p_until_YYYY_MM),
-- copy its forget tombstones to forget_tombstones, delete the captured text of its records,
-- note each tenant's new expiry horizon, then drop that partition of every partitioned table.
-- The drops are catalog changes, as quick at a billion rows as at ten; they wait for the
-- parents' lock at most lock_timeout, so appends are never queued behind a long walk for
-- longer. Partitions for the months ahead are added first (none while the open partition is
-- there). A partition still holding records the verifiable log has not taken in (their events
-- past the tenant's events_logged) waits for a later round (months_waiting): dropped first, they would never be logged. A round
-- that drops one is audited in operator_audit; returns the receipt. The owner's, callable by
-- the application role for the service's schedule: it applies the owner's policy and cannot
-- change it.
CREATE OR REPLACE FUNCTION public.lineage_retention_apply(p_now timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    keep int;
    cutoff timestamptz;
    added int;
    month record;
    tenant text;
    months jsonb := '[]';
    waiting jsonb := '[]';
    queued boolean;
    label text;
    suffixes text[] := '{}';
    suffix text;
    tombstones bigint := 0;
    texts bigint := 0;
    copied bigint;
    purged bigint;
    receipt jsonb;
    parent text;
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    SET LOCAL citus.propagate_set_commands = 'local';  -- the tenant reaches Citus's workers
    added := public.lineage_add_partitions(p_now, p_now + interval '2 months');
    SELECT r.keep_months INTO keep FROM public.retention_policy AS r;
    cutoff := p_now - make_interval(months => coalesce(keep, 0));
    FOR month IN
        SELECT p.partition, p.suffix, p.lower, p.upper,
               greatest(c.reltuples, 0)::bigint AS rows_estimated
        FROM public.lineage_partitions('public.provenance') AS p
        JOIN pg_class AS c ON c.relname = p.partition
             AND c.relnamespace = 'public'::regnamespace
        WHERE keep IS NOT NULL AND p.upper <= cutoff
    LOOP
        label := CASE WHEN month.lower = '-infinity'
                     THEN 'before ' || to_char(month.upper AT TIME ZONE 'UTC', 'YYYY-MM')
                     ELSE to_char(month.lower AT TIME ZONE 'UTC', 'YYYY-MM') END;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM public.tenant_counters AS c '
                       'LEFT JOIN public.log_heads AS h ON h.tenant_id = c.tenant_id '
                       'JOIN public.events AS e ON e.tenant_id = c.tenant_id '
                       'AND e.position > coalesce(h.events_logged, 0) '
                       'JOIN public.%I AS p '
                       'ON p.tenant_id = e.tenant_id AND p.context_id = e.context_id '
                       'WHERE c.counter = ''events'')',
                       month.partition) INTO queued;
        IF queued THEN
            waiting := waiting || to_jsonb(label);
            CONTINUE;
        END IF;
        FOR tenant IN SELECT t.tenant_id FROM public.tenants AS t ORDER BY t.tenant_id LOOP
            EXECUTE format('SET LOCAL lineage.tenant_id = %L', tenant);
            EXECUTE format(
                'WITH kept AS (INSERT INTO public.forget_tombstones '
                'SELECT p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri, '
                'p.content_hash, p.transform, p.transform_version, p.produced_by, '
                'p.index_snapshot, p.trace_id, p.created_at, p.attributes, p.key_id, p.signature '
                'FROM public.%I AS p '
                'WHERE p.tenant_id = $1 AND p.kind = ''tombstone'' '
                'ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM kept',
                month.partition)
                INTO copied USING tenant;
            EXECUTE format(
                'WITH gone AS (DELETE FROM public.context_text AS t USING public.%I AS p '
                'WHERE t.tenant_id = $1 AND p.tenant_id = $1 AND p.context_id = t.context_id '
                'RETURNING 1) SELECT count(*) FROM gone', month.partition)
                INTO purged USING tenant;
            INSERT INTO public.tenant_expiry AS e (tenant_id, expired_before)
            VALUES (tenant, month.upper)
            ON CONFLICT (tenant_id) DO UPDATE
                SET expired_before = greatest(e.expired_before, excluded.expired_before);
            tombstones := tombstones + copied;
            texts := texts + purged;
        END LOOP;
        months := months || jsonb_build_object(
            'month', label,
            'from', CASE WHEN month.lower <> '-infinity' THEN month.lower END, 'to', month.upper,
            'records_estimated', month.rows_estimated);
        suffixes := suffixes || month.suffix;
    END LOOP;
    SET LOCAL lineage.tenant_id = '';
    FOREACH suffix IN ARRAY suffixes LOOP
        FOREACH parent IN ARRAY public.lineage_partitioned_tables() LOOP
            EXECUTE format('DROP TABLE IF EXISTS public.%I', parent || suffix);
        END LOOP;
    END LOOP;
    receipt := jsonb_build_object(
        'keep_months', keep, 'expired_before', CASE WHEN keep IS NOT NULL THEN cutoff END,
        'months_dropped', months, 'months_waiting', waiting, 'partitions_added', added,
        'tombstones_kept', tombstones, 'texts_purged', texts, 'applied_at', clock_timestamp());
    IF jsonb_array_length(months) > 0 THEN
        INSERT INTO public.operator_audit (action, target, detail)
        VALUES ('retention_apply', 'provenance', receipt);
    END IF;
    RETURN receipt;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_retention_apply(p_now timestamp with time zone) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_retention_apply(p_now timestamp with time zone) TO lineage_app;
