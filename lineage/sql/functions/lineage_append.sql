-- An append: a batch of stamped, signed records (parallel arrays, one element per record), for
-- the tenant its token vouches for, with what lineage.services.appends computed for it from the
-- parents' (lineage.services.postings): the batch's invalidation keys, each once (p_keys: a
-- transform version, an index snapshot, 'source:' and a root's source_uri); each record's
-- upstream keys and root sources as positions in p_keys with their depths (array literals);
-- and its postings, already grouped a row per key, kind, depth and month of at most 1,000 ids
-- of each form in id order (p_posting_*: a UUID as uuid prints it, kept in 16 bytes, else text).
-- A record keeps its keys by their numbers in the tenant's invalidation_keys, which this
-- numbers the first time a key comes. Ids already stored are left alone and not returned: the
-- caller compares them.
-- Everything a record is stored with (its signature, on its row; its edges, postings by root
-- source and by invalidation key, transform version and stream position, which also queues
-- it for the verifiable log) is written here, so the application role needs no INSERT on those
-- tables and no direct write can leave a record out of the log or sign it twice.
-- Single-shard statements in sequence, never a chain of modifying CTEs: on Citus the function
-- is distributed by p_tenant (lineage distribute), so the whole call runs on the tenant's
-- worker and no other worker is reached. Returns the ids inserted (in batch order), the last
-- stream position given (NULL when none was), and any id a concurrent append stored in another
-- month partition at the same moment (whichever commits second gives way).
CREATE OR REPLACE FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_is_uuids boolean[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_keys text[], p_upstream_key_lists text[], p_upstream_depth_lists text[], p_root_source_lists text[], p_root_depth_lists text[], p_posting_keys integer[], p_posting_kinds text[], p_posting_depths integer[], p_posting_created_ats timestamp with time zone[], p_posting_uuid_lists text[], p_posting_id_lists text[])
 RETURNS TABLE(inserted text[], last_position bigint, stored_twice text[])
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET jit TO 'off'
AS $function$
DECLARE
    stored text[];
    key_nos integer[];
    new_ids text[];
    all_new boolean;
    position_after bigint;
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Row security holds inside the function too (the tables force it on their owner).
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    -- An id kept as uuid must print back as itself (lowercase, hyphenated), or it would change.
    IF EXISTS (SELECT 1 FROM unnest(p_context_ids, p_is_uuids) AS r (context_id, is_uuid)
               WHERE r.is_uuid AND r.context_id::uuid::text <> r.context_id) THEN
        RAISE EXCEPTION 'an id marked as a UUID does not print back as itself'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Ids stored before: while provenance has one partition, its unique index finds them (ON
    -- CONFLICT below); several each have their own, so they are looked up here.
    IF (SELECT count(*) FROM pg_inherits AS h
        WHERE h.inhparent = 'public.provenance'::regclass) = 1 THEN
        stored := '{}';
    ELSE
        SELECT coalesce(array_agg(p.context_id), '{}') INTO stored
        FROM unnest(p_context_ids) AS wanted (context_id)
        CROSS JOIN LATERAL (SELECT p.context_id FROM public.provenance AS p
                            WHERE p.tenant_id = p_tenant AND p.context_id = wanted.context_id
                            OFFSET 0) AS p;
    END IF;

    -- Each key's number, in p_keys' order. A probe per key (OFFSET 0 keeps the subquery
    -- apart), whatever the statistics say: as a filter or a join, a plan made while the
    -- tenant's keys were few read all of them each append, and an append of 1,000 documents
    -- took 2.6 s beside 200,000 keys.
    SELECT array_agg(k.key_no ORDER BY c.o) INTO key_nos
    FROM unnest(p_keys) WITH ORDINALITY AS c (key, o)
    CROSS JOIN LATERAL (SELECT k.key_no FROM public.invalidation_keys AS k
                        WHERE k.tenant_id = p_tenant AND k.key = c.key OFFSET 0) AS k;
    IF coalesce(cardinality(key_nos), 0) < cardinality(p_keys) THEN
        -- One append numbers the tenant's new keys at a time (the lock holds to commit, and
        -- what another numbered meanwhile is seen from here on); the lock's key hashes the
        -- token, so no other tenant's session can take it.
        PERFORM pg_advisory_xact_lock(
            hashtextextended('invalidation_keys/' || p_token || '/' || p_tenant, 0));
        INSERT INTO public.invalidation_keys (tenant_id, key_no, key)
        SELECT p_tenant,
               coalesce((SELECT max(k.key_no) FROM public.invalidation_keys AS k
                         WHERE k.tenant_id = p_tenant), 0)
               + row_number() OVER (ORDER BY n.key),
               n.key
        FROM (SELECT DISTINCT key FROM unnest(p_keys) AS key) AS n
        WHERE NOT EXISTS (SELECT 1 FROM public.invalidation_keys AS k
                          WHERE k.tenant_id = p_tenant AND k.key = n.key OFFSET 0);
        SELECT array_agg(k.key_no ORDER BY c.o) INTO key_nos
        FROM unnest(p_keys) WITH ORDINALITY AS c (key, o)
        CROSS JOIN LATERAL (SELECT k.key_no FROM public.invalidation_keys AS k
                            WHERE k.tenant_id = p_tenant AND k.key = c.key OFFSET 0) AS k;
    END IF;

    WITH written AS (
        INSERT INTO public.provenance AS p (tenant_id, context_id, parent_ids, kind, source_uri,
            content_hash, transform, transform_version, produced_by, index_snapshot, trace_id,
            created_at, attributes, upstream_keys, upstream_depths, root_sources, root_depths,
            key_id, signature)
        SELECT p_tenant, r.context_id, r.parent_ids::text[], r.kind, r.source_uri,
               r.content_hash, r.transform, r.transform_version, r.produced_by,
               r.index_snapshot, r.trace_id, r.created_at, r.attributes::jsonb,
               CASE WHEN r.upstream_keys IS NOT NULL THEN
                   ARRAY(SELECT key_nos[u.position]
                         FROM unnest(r.upstream_keys::integer[]) WITH ORDINALITY AS u (position, o)
                         ORDER BY u.o) END,
               r.upstream_depths::integer[],
               -- A tombstone holds its source only as a keyed hash: the postings list it.
               CASE WHEN r.kind <> 'tombstone' AND r.root_sources IS NOT NULL THEN
                   ARRAY(SELECT key_nos[u.position]
                         FROM unnest(r.root_sources::integer[]) WITH ORDINALITY AS u (position, o)
                         ORDER BY u.o) END,
               CASE WHEN r.kind <> 'tombstone' THEN r.root_depths::integer[] END,
               r.key_id, r.signature
        FROM unnest(p_context_ids, p_parent_id_lists, p_kinds, p_source_uris, p_content_hashes,
                    p_transforms, p_transform_versions, p_produced_bys, p_index_snapshots,
                    p_trace_ids, p_created_ats, p_attribute_docs, p_upstream_key_lists,
                    p_upstream_depth_lists, p_root_source_lists, p_root_depth_lists, p_key_ids,
                    p_signatures)
             AS r (context_id, parent_ids, kind, source_uri, content_hash, transform,
                   transform_version, produced_by, index_snapshot, trace_id, created_at,
                   attributes, upstream_keys, upstream_depths, root_sources, root_depths, key_id,
                   signature)
        WHERE r.context_id <> ALL (stored)
        ON CONFLICT DO NOTHING
        RETURNING p.context_id
    )
    SELECT coalesce(array_agg(w.context_id), '{}') INTO new_ids FROM written AS w;
    IF cardinality(new_ids) = 0 THEN
        RETURN QUERY SELECT new_ids, NULL::bigint, '{}'::text[];
        RETURN;
    END IF;
    -- The common case: no id was stored before, so no row is compared with every new id.
    all_new := cardinality(new_ids) = cardinality(p_context_ids);

    -- An edge in 16 bytes an id (migration 0050): the parent by md5 of its id, looked up and
    -- never printed; the child as uuid when its id prints back as a uuid, else as text.
    INSERT INTO public.provenance_children (tenant_id, parent_key, context_uuid, context_id,
                                            created_at, kind)
    SELECT p_tenant, md5(parent.id)::uuid,
           CASE WHEN r.is_uuid THEN r.context_id::uuid END,
           CASE WHEN NOT r.is_uuid THEN r.context_id END,
           r.created_at, r.kind
    FROM unnest(p_context_ids, p_parent_id_lists, p_created_ats, p_kinds, p_is_uuids)
         AS r (context_id, parent_ids, created_at, kind, is_uuid)
         CROSS JOIN LATERAL unnest(r.parent_ids::text[]) AS parent (id)
    WHERE all_new OR r.context_id = ANY (new_ids);

    -- The postings as given, each key by its number: a month's rows lie in its records'
    -- partition, so retention drops them alike. Ids stored before are left out of them.
    INSERT INTO public.invalidation_postings (tenant_id, key_no, kind, depth, created_at,
                                              context_uuids, context_ids)
    SELECT p_tenant, key_nos[g.key], g.kind, g.depth, g.created_at, g.context_uuids,
           g.context_ids
    FROM (SELECT g.key, g.kind, g.depth, g.created_at,
                 CASE WHEN all_new THEN g.uuids::uuid[]
                      ELSE nullif(ARRAY(SELECT u FROM unnest(g.uuids::uuid[]) AS u
                                        WHERE u::text = ANY (new_ids)), '{}') END
                     AS context_uuids,
                 CASE WHEN all_new THEN g.ids::text[]
                      ELSE nullif(ARRAY(SELECT i FROM unnest(g.ids::text[]) AS i
                                        WHERE i = ANY (new_ids)), '{}') END
                     AS context_ids
          FROM unnest(p_posting_keys, p_posting_kinds, p_posting_depths, p_posting_created_ats,
                      p_posting_uuid_lists, p_posting_id_lists)
               AS g (key, kind, depth, created_at, uuids, ids)
          OFFSET 0) AS g  -- each list parsed once, not again in the filter
    WHERE g.context_uuids IS NOT NULL OR g.context_ids IS NOT NULL;

    INSERT INTO public.transform_versions (tenant_id, transform, transform_version, version_key,
                                           first_seen)
    SELECT p_tenant, split_part(v.transform_version, '@', 1), v.transform_version,
           min(v.version_key), min(v.created_at)
    FROM unnest(p_context_ids, p_transform_versions, p_version_keys, p_created_ats)
         AS v (context_id, transform_version, version_key, created_at)
    WHERE v.transform_version IS NOT NULL AND (all_new OR v.context_id = ANY (new_ids))
    GROUP BY v.transform_version
    ON CONFLICT DO NOTHING;

    -- Last: the tenant's counter row stays locked until commit, so positions commit in order;
    -- the events past log_heads.events_logged are the verifiable log's queue.
    INSERT INTO public.tenant_counters AS c (tenant_id, counter, last_value)
    VALUES (p_tenant, 'events', cardinality(new_ids))
    ON CONFLICT (tenant_id, counter)
        DO UPDATE SET last_value = c.last_value + cardinality(new_ids)
    RETURNING c.last_value INTO position_after;
    INSERT INTO public.events (tenant_id, position, context_id)
    SELECT p_tenant, position_after - cardinality(new_ids) + n.ordinal, n.context_id
    FROM unnest(new_ids) WITH ORDINALITY AS n (context_id, ordinal);

    -- One partition over all time is unique by its index; months are checked here.
    IF EXISTS (SELECT 1 FROM pg_inherits AS h JOIN pg_class AS c ON c.oid = h.inhrelid
               WHERE h.inhparent = 'public.provenance'::regclass
                 AND pg_get_expr(c.relpartbound, c.oid)
                     <> 'FOR VALUES FROM (MINVALUE) TO (MAXVALUE)') THEN
        RETURN QUERY
        SELECT new_ids, position_after, coalesce(array_agg(t.context_id), '{}')
        FROM (SELECT p.context_id
              FROM unnest(new_ids) AS n (context_id)
              CROSS JOIN LATERAL (SELECT p.context_id FROM public.provenance AS p
                                  WHERE p.tenant_id = p_tenant AND p.context_id = n.context_id
                                  OFFSET 0) AS p
              GROUP BY p.context_id HAVING count(*) > 1) AS t;
        RETURN;
    END IF;
    RETURN QUERY SELECT new_ids, position_after, '{}'::text[];
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_is_uuids boolean[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_keys text[], p_upstream_key_lists text[], p_upstream_depth_lists text[], p_root_source_lists text[], p_root_depth_lists text[], p_posting_keys integer[], p_posting_kinds text[], p_posting_depths integer[], p_posting_created_ats timestamp with time zone[], p_posting_uuid_lists text[], p_posting_id_lists text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_is_uuids boolean[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_keys text[], p_upstream_key_lists text[], p_upstream_depth_lists text[], p_root_source_lists text[], p_root_depth_lists text[], p_posting_keys integer[], p_posting_kinds text[], p_posting_depths integer[], p_posting_created_ats timestamp with time zone[], p_posting_uuid_lists text[], p_posting_id_lists text[]) TO lineage_app;
