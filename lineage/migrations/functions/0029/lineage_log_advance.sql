-- One step of the tenant's verifiable log, in the transaction that locked its head
-- (lineage_log_lock): queued records become leaves p_old_size.. in the order given, with the
-- tree nodes they complete and the new root, and leave the queue. Each record must be queued,
-- and given once, and the head must still be at p_old_size: so no caller can dequeue a record
-- without its leaf or move the head by hand (the application role has no write on these tables
-- but through here); a record left out stays queued for the next step. Distributed by p_tenant.
CREATE OR REPLACE FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    head_size bigint;
    queued bigint[];
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    SELECT h.tree_size INTO head_size FROM public.log_heads AS h
    WHERE h.tenant_id = p_tenant FOR UPDATE;
    IF head_size IS DISTINCT FROM p_old_size THEN
        RAISE EXCEPTION 'the log of % is at size %, not %', p_tenant, head_size, p_old_size
            USING ERRCODE = 'serialization_failure';
    END IF;
    SELECT coalesce(array_agg(q.queued_id), '{}') INTO queued
    FROM public.log_queue AS q
    WHERE q.tenant_id = p_tenant AND q.context_id = ANY (p_context_ids);
    IF cardinality(queued) <> cardinality(p_context_ids)
       OR cardinality(p_context_ids) <> (SELECT count(DISTINCT c) FROM unnest(p_context_ids) AS c)
    THEN
        RAISE EXCEPTION 'the records given are not each queued in the log of %, once', p_tenant
            USING ERRCODE = 'serialization_failure';
    END IF;
    INSERT INTO public.log_leaves (tenant_id, leaf_index, context_id, created_at)
    SELECT p_tenant, p_old_size + l.ordinal - 1, l.context_id, l.created_at
    FROM unnest(p_context_ids, p_created_ats) WITH ORDINALITY AS l (context_id, created_at, ordinal);
    INSERT INTO public.log_nodes (tenant_id, level, node_index, hash)
    SELECT p_tenant, n.level, n.node_index, n.hash
    FROM unnest(p_levels, p_node_indexes, p_hashes) AS n (level, node_index, hash);
    UPDATE public.log_heads AS h
    SET tree_size = p_old_size + cardinality(p_context_ids), root_hash = p_root_hash,
        updated_at = now()
    WHERE h.tenant_id = p_tenant;
    DELETE FROM public.log_queue AS l WHERE l.tenant_id = p_tenant AND l.queued_id = ANY (queued);
    RETURN p_old_size + cardinality(p_context_ids);
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) TO lineage_app;
