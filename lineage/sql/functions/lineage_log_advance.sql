-- One step of the tenant's verifiable log, in the transaction that locked its head
-- (lineage_log_lock): the records of the tenant's next events past events_logged (its queue)
-- become leaves p_old_size.. in stream order, with the kept tree nodes they complete (each
-- leaf's hash, and those of every fourth level above) and the new root, and events_logged
-- moves past them. The records given must be those next events'
-- stored records, in order (an event whose record is no longer stored is passed over), and the
-- head must still be at p_old_size: so no caller can skip a record or move the head by hand
-- (the application role has no write on these tables but through here). Distributed by
-- p_tenant.
CREATE OR REPLACE FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    head_size bigint;
    logged bigint;
    through bigint;
    next_ids text[];
    leaves bigint;
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    SELECT h.tree_size, h.events_logged INTO head_size, logged FROM public.log_heads AS h
    WHERE h.tenant_id = p_tenant FOR UPDATE;
    IF head_size IS DISTINCT FROM p_old_size THEN
        RAISE EXCEPTION 'the log of % is at size %, not %', p_tenant, head_size, p_old_size
            USING ERRCODE = 'serialization_failure';
    END IF;
    IF cardinality(p_context_ids) = 0 THEN
        through := logged;
    ELSE
        SELECT e.position INTO through FROM public.events AS e
        WHERE e.tenant_id = p_tenant AND e.position > logged
          AND e.context_id = p_context_ids[cardinality(p_context_ids)]
        ORDER BY e.position LIMIT 1;
    END IF;
    SELECT coalesce(array_agg(e.context_id ORDER BY e.position), '{}') INTO next_ids
    FROM public.events AS e
    WHERE e.tenant_id = p_tenant AND e.position > logged AND e.position <= through
      AND EXISTS (SELECT 1 FROM public.provenance AS r
                  WHERE r.tenant_id = p_tenant AND r.context_id = e.context_id);
    IF through IS NULL OR next_ids IS DISTINCT FROM p_context_ids THEN
        RAISE EXCEPTION 'the records given are not the next ones queued in the log of %, in order',
                        p_tenant
            USING ERRCODE = 'serialization_failure';
    END IF;
    -- Each leaf's hash (level 0) on its row; the other subtrees kept (every fourth level) in
    -- log_nodes, whose check refuses any other level.
    INSERT INTO public.log_leaves (tenant_id, leaf_index, context_id, created_at, hash)
    SELECT p_tenant, p_old_size + l.ordinal - 1, l.context_id, l.created_at, n.hash
    FROM unnest(p_context_ids, p_created_ats) WITH ORDINALITY AS l (context_id, created_at, ordinal)
    JOIN unnest(p_levels, p_node_indexes, p_hashes) AS n (level, node_index, hash)
      ON n.level = 0 AND n.node_index = p_old_size + l.ordinal - 1;
    GET DIAGNOSTICS leaves = ROW_COUNT;
    IF leaves <> cardinality(p_context_ids) THEN
        RAISE EXCEPTION 'each new leaf of the log of % needs its hash (level 0, its index)',
                        p_tenant
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO public.log_nodes (tenant_id, level, node_index, hash)
    SELECT p_tenant, n.level, n.node_index, n.hash
    FROM unnest(p_levels, p_node_indexes, p_hashes) AS n (level, node_index, hash)
    WHERE n.level > 0;
    UPDATE public.log_heads AS h
    SET tree_size = p_old_size + cardinality(p_context_ids), root_hash = p_root_hash,
        events_logged = through, updated_at = now()
    WHERE h.tenant_id = p_tenant;
    RETURN p_old_size + cardinality(p_context_ids);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) TO lineage_app;
