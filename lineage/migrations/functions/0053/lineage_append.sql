-- An append: a batch of stamped, signed records (parallel arrays, one element per record;
-- parent ids, root sources, upstream keys and their depths as array literals, which lineage.
-- services.root_sources and .postings compute from the parents'), for the tenant its token
-- vouches for. A record keeps its root sources and upstream keys by their numbers in the
-- tenant's invalidation_keys ('source:' and the source_uri for a root source), which this
-- numbers the first time a key comes. Ids already stored are left alone and not returned: the caller compares them.
-- Everything a record is stored with (its signature, on its row; its edges, postings by root
-- source and by invalidation key, transform version and stream position, which also queues
-- it for the verifiable log) is written here, so the application role needs no INSERT on those
-- tables and no direct write can leave a record out of the log or sign it twice.
-- Single-shard statements in sequence, never a chain of modifying CTEs: on Citus the function
-- is distributed by p_tenant (lineage distribute), so the whole call runs on the tenant's
-- worker and no other worker is reached. Returns the ids inserted (in batch order), the last
-- stream position given (NULL when none was), and any id a concurrent append stored in another
-- month partition at the same moment (whichever commits second gives way).
CREATE OR REPLACE FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_root_source_lists text[], p_root_depth_lists text[], p_upstream_key_lists text[], p_upstream_depth_lists text[])
 RETURNS TABLE(inserted text[], last_position bigint, stored_twice text[])
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    stored text[];
    carried text[];
    numbers jsonb;
    new_ids text[];
    all_new boolean;
    is_uuids boolean[];
    position_after bigint;
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Row security holds inside the function too (the tables force it on their owner).
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);

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

    SELECT coalesce(array_agg(d.key), '{}') INTO carried
    FROM (SELECT DISTINCT c.key
          FROM unnest(p_upstream_key_lists, p_root_source_lists) AS r (upstream_keys, root_sources)
          CROSS JOIN LATERAL (SELECT unnest(r.upstream_keys::text[])
                              UNION ALL
                              SELECT 'source:' || unnest(r.root_sources::text[])) AS c (key)) AS d;
    -- A probe per key (OFFSET 0 keeps the subquery apart), whatever the statistics say: as a
    -- filter or a join, a plan made while the tenant's keys were few read all of them each
    -- append, and an append of 1,000 documents took 2.6 s beside 200,000 keys.
    SELECT coalesce(jsonb_object_agg(c.key, k.key_no), '{}') INTO numbers
    FROM unnest(carried) AS c (key)
    CROSS JOIN LATERAL (SELECT k.key_no FROM public.invalidation_keys AS k
                        WHERE k.tenant_id = p_tenant AND k.key = c.key OFFSET 0) AS k;
    IF (SELECT count(*) FROM jsonb_object_keys(numbers)) < cardinality(carried) THEN
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
        FROM unnest(carried) AS n (key)
        WHERE NOT EXISTS (SELECT 1 FROM public.invalidation_keys AS k
                          WHERE k.tenant_id = p_tenant AND k.key = n.key OFFSET 0);
        SELECT jsonb_object_agg(c.key, k.key_no) INTO numbers
        FROM unnest(carried) AS c (key)
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
                   ARRAY(SELECT (numbers ->> u.key)::integer
                         FROM unnest(r.upstream_keys::text[]) WITH ORDINALITY AS u (key, o)
                         ORDER BY u.o) END,
               r.upstream_depths::integer[],
               -- A tombstone holds its source only as a keyed hash: the postings list it.
               CASE WHEN r.kind <> 'tombstone' AND r.root_sources IS NOT NULL THEN
                   ARRAY(SELECT (numbers ->> ('source:' || u.uri))::integer
                         FROM unnest(r.root_sources::text[]) WITH ORDINALITY AS u (uri, o)
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
    -- Each id's form, found once for the edges and the postings: a UUID as uuid prints it
    -- (lowercase, hyphenated) is kept in 16 bytes, any other id as text.
    is_uuids := ARRAY(SELECT id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                      FROM unnest(p_context_ids) AS id);

    -- An edge in 16 bytes an id (migration 0050): the parent by md5 of its id, looked up and
    -- never printed; the child as uuid when its id prints back as a uuid, else as text.
    INSERT INTO public.provenance_children (tenant_id, parent_key, context_uuid, context_id,
                                            created_at, kind)
    SELECT p_tenant, md5(parent.id)::uuid,
           CASE WHEN r.is_uuid THEN r.context_id::uuid END,
           CASE WHEN NOT r.is_uuid THEN r.context_id END,
           r.created_at, r.kind
    FROM unnest(p_context_ids, p_parent_id_lists, p_created_ats, p_kinds, is_uuids)
         AS r (context_id, parent_ids, created_at, kind, is_uuid)
         CROSS JOIN LATERAL unnest(r.parent_ids::text[]) AS parent (id)
    WHERE all_new OR r.context_id = ANY (new_ids);

    -- The new records' postings, by invalidation key and by root source ('source:' and its
    -- source_uri), each key by its number, a row per key, kind, depth and month of at most
    -- 1,000 ids of each form in id order: a month's rows lie in its records' partition, so
    -- retention drops them alike. An id that is a UUID as uuid prints it (lowercase,
    -- hyphenated) is kept in 16 bytes (context_uuids), any other as text; an empty list is null.
    -- Each group is aggregated once and sliced, with no numbering of its rows.
    INSERT INTO public.invalidation_postings (tenant_id, key_no, kind, depth, created_at,
                                              context_uuids, context_ids)
    SELECT p_tenant, (numbers ->> g.key)::integer, g.kind, g.depth, g.created_at,
           nullif(g.context_uuids[s.first:s.first + 999], '{}'),
           nullif(g.context_ids[s.first:s.first + 999], '{}')
    FROM (SELECT up.key, r.kind, up.depth, min(r.created_at) AS created_at,
                 array_agg(r.context_id::uuid ORDER BY r.context_id) FILTER (WHERE r.is_uuid)
                     AS context_uuids,
                 array_agg(r.context_id ORDER BY r.context_id) FILTER (WHERE NOT r.is_uuid)
                     AS context_ids
          FROM unnest(p_context_ids, p_kinds, p_created_ats, p_upstream_key_lists,
                      p_upstream_depth_lists, p_root_source_lists, p_root_depth_lists, is_uuids)
               AS r (context_id, kind, created_at, upstream_keys, upstream_depths, root_sources,
                     root_depths, is_uuid)
               CROSS JOIN LATERAL (
                   SELECT * FROM unnest(r.upstream_keys::text[], r.upstream_depths::integer[])
                 UNION ALL
                   SELECT 'source:' || root.uri, root.depth
                   FROM unnest(r.root_sources::text[], r.root_depths::integer[])
                        AS root (uri, depth)
               ) AS up (key, depth)
          WHERE all_new OR r.context_id = ANY (new_ids)
          GROUP BY up.key, r.kind, up.depth, date_trunc('month', r.created_at, 'UTC')) AS g
         CROSS JOIN LATERAL generate_series(
             1, greatest(cardinality(g.context_uuids), cardinality(g.context_ids)), 1000)
             AS s (first);

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
REVOKE ALL ON FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_root_source_lists text[], p_root_depth_lists text[], p_upstream_key_lists text[], p_upstream_depth_lists text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_root_source_lists text[], p_root_depth_lists text[], p_upstream_key_lists text[], p_upstream_depth_lists text[]) TO lineage_app;
