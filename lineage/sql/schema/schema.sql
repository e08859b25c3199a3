-- The schema of a database migrated to the newest revision (pg_dump --schema-only,
-- normalised by lineage/db/schema_dump.py). After any migration, regenerate it:
--     python -m lineage.db.schema_dump > lineage/sql/schema/schema.sql

CREATE FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    month timestamptz := date_trunc('month', p_from, 'UTC');
    parent text;
    added int := 0;
BEGIN
    IF p_through - p_from > interval '100 years' THEN
        RAISE EXCEPTION 'no partitions for % months', p_through - p_from;
    END IF;
    WHILE month <= p_through LOOP
        FOREACH parent IN ARRAY public.lineage_partitioned_tables() LOOP
            CONTINUE WHEN EXISTS (
                SELECT 1 FROM public.lineage_partitions(('public.' || parent)::regclass) AS p
                WHERE p.lower < month + interval '1 month' AND p.upper > month);
            PERFORM public.lineage_create_partition(
                parent, parent || '_p' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM'),
                month, month + interval '1 month');
            added := added + 1;
        END LOOP;
        month := month + interval '1 month';
    END LOOP;
    RETURN added;
END
$$;

CREATE FUNCTION public.lineage_analyze(p_table text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '100ms'
    AS $$
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
$$;

CREATE FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_is_uuids boolean[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_keys text[], p_upstream_key_lists text[], p_upstream_depth_lists text[], p_root_source_lists text[], p_root_depth_lists text[], p_posting_keys integer[], p_posting_kinds text[], p_posting_depths integer[], p_posting_created_ats timestamp with time zone[], p_posting_uuid_lists text[], p_posting_id_lists text[]) RETURNS TABLE(inserted text[], last_position bigint, stored_twice text[])
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
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
$$;

CREATE FUNCTION public.lineage_audit_append(p_tenant_id text, p_at timestamp with time zone, p_key_id text, p_action text, p_target text, p_detail jsonb) RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
WITH counter AS (
    INSERT INTO public.tenant_counters AS c (tenant_id, counter, last_value)
    VALUES ($1, 'audit', 1)
    ON CONFLICT (tenant_id, counter) DO UPDATE SET last_value = c.last_value + 1
    RETURNING c.last_value
)
INSERT INTO public.audit_log (tenant_id, audit_id, at, key_id, action, target, detail)
SELECT $1, counter.last_value, coalesce($2::timestamptz, clock_timestamp()),
       nullif($3, ''), $4, nullif($5, ''), $6::jsonb
FROM counter
RETURNING audit_id
$_$;

CREATE FUNCTION public.lineage_blast_radius(p_max_depth integer, p_context_ids text[], p_tenant_id text, p_kind text, p_token text, p_audit jsonb DEFAULT NULL::jsonb) RETURNS TABLE(context_id text, depth integer, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb, truncated boolean, expired boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $_$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: blast_radius
    WITH RECURSIVE walk_limit (depth) AS (SELECT $1::integer),
    walk (depth, frontier, kinds, seen, seen_kinds) AS (
        SELECT 0, start.ids, start.kinds, start.ids, start.kinds
        FROM (SELECT coalesce(array_agg(wanted.id), '{}') AS ids,
                     coalesce(array_agg(p.kind), '{}') AS kinds
              FROM unnest($2::text[]) AS wanted (id)
              LEFT JOIN public.provenance AS p
                     ON p.tenant_id = $3 AND p.context_id = wanted.id
              WHERE p.context_id IS NOT NULL
                 OR EXISTS (SELECT 1 FROM public.log_leaves AS l
                            WHERE l.tenant_id = $3 AND l.context_id = wanted.id)) AS start
      UNION ALL
        SELECT w.depth + 1, step.ids, step.kinds, w.seen || step.ids, w.seen_kinds || step.kinds
        FROM walk AS w
        CROSS JOIN LATERAL (
            SELECT coalesce(array_agg(child.id), '{}') AS ids,
                   coalesce(array_agg(child.kind), '{}') AS kinds
            FROM (
                SELECT e.context_id, e.kind
                FROM (SELECT md5(id)::uuid FROM unnest(w.frontier) AS id OFFSET 0) AS parent (key)
                CROSS JOIN LATERAL (
                    SELECT coalesce(x.context_uuid::text, x.context_id) AS context_id, x.kind
                    FROM public.provenance_children AS x
                    WHERE x.tenant_id = $3 AND x.parent_key = parent.key
                    OFFSET 0
                ) AS e
                EXCEPT
                SELECT * FROM unnest(w.seen, w.seen_kinds)
            ) AS child (id, kind)
            OFFSET 0  -- evaluate the step once, not once per use of its result
        ) AS step
        WHERE w.depth <= (SELECT depth FROM walk_limit) AND cardinality(w.frontier) > 0
    )
    SELECT r.context_id, w.depth, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
           r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
           r.attributes,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = $1 + 1), false) AS truncated,
           (SELECT array_position(b.kinds, NULL) IS NOT NULL FROM walk AS b
            WHERE b.depth = 0) AS expired
    FROM walk AS w
    CROSS JOIN LATERAL unnest(w.frontier, w.kinds) AS node (id, kind)
    JOIN public.provenance AS r ON r.tenant_id = $3 AND r.context_id = node.id
    WHERE w.depth <= $1
      AND (node.kind = $4 OR $4 = 'all'
           OR ($4 = 'any' AND node.kind NOT IN ('verdict', 'tombstone')))
    ORDER BY w.depth, r.context_id COLLATE "C"
    -- end statement: blast_radius
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$_$;

CREATE FUNCTION public.lineage_captures(p_tenant_id text, p_context_id text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    RETURN coalesce((
        SELECT CASE
                   WHEN p.kind OPERATOR(pg_catalog.=) 'query' THEN s.capture_query_text
                   WHEN p.kind IN ('claim', 'answer') THEN s.capture_answer_text
                   ELSE s.capture_source_text
               END
        FROM public.provenance AS p
        JOIN public.tenant_settings AS s ON s.tenant_id OPERATOR(pg_catalog.=) p.tenant_id
        WHERE p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
          AND p.context_id OPERATOR(pg_catalog.=) p_context_id
    ), false);
END
$$;

CREATE FUNCTION public.lineage_create_partition(p_parent text, p_name text, p_lower timestamp with time zone, p_upper timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I FOR VALUES FROM (%s) TO (%s)',
                   p_name, p_parent,
                   CASE WHEN p_lower = '-infinity' THEN 'MINVALUE' ELSE quote_literal(p_lower) END,
                   CASE WHEN p_upper = 'infinity' THEN 'MAXVALUE' ELSE quote_literal(p_upper) END);
    IF p_parent = 'provenance' THEN
        EXECUTE format('CREATE UNIQUE INDEX %I ON public.%I (tenant_id, context_id)',
                       p_name || '_id', p_name);
        EXECUTE format('ALTER TABLE public.%I REPLICA IDENTITY USING INDEX %I',
                       p_name, p_name || '_id');
    ELSIF p_parent IN ('invalidation_postings', 'provenance_children') THEN
        EXECUTE format('ALTER TABLE public.%I REPLICA IDENTITY FULL', p_name);
    END IF;
    EXECUTE format('REVOKE UPDATE, TRUNCATE ON public.%I FROM PUBLIC, %I', p_name, current_user);
END
$$;

CREATE FUNCTION public.lineage_delete_tenant(p_tenant_id text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
DECLARE
    remaining regclass[];
    chosen regclass;
    deleted bigint;
    counts jsonb := '{}';
    last_checkpoint jsonb;
    receipt jsonb;
BEGIN
    PERFORM set_config('lineage.tenant_id', p_tenant_id, true);
    IF NOT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = p_tenant_id) THEN
        RAISE EXCEPTION 'no tenant %', p_tenant_id USING ERRCODE = 'no_data_found';
    END IF;
    SELECT jsonb_build_object('tree_size', c.tree_size,
                              'root_hash', encode(c.root_hash, 'base64'),
                              'signed_at', c.signed_at, 'note', c.note)
    INTO last_checkpoint
    FROM log_checkpoints AS c WHERE c.tenant_id = p_tenant_id
    ORDER BY c.tree_size DESC LIMIT 1;
    INSERT INTO tenant_deleting (tenant_id) VALUES (p_tenant_id);
    remaining := ARRAY(
        SELECT c.oid::regclass
        FROM pg_class AS c
        JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
                              AND NOT a.attisdropped
        WHERE c.relnamespace = to_regnamespace(current_schema())
          AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND c.oid <> 'tenant_deleting'::regclass
    );
    WHILE cardinality(remaining) > 0 LOOP
        SELECT t INTO chosen
        FROM unnest(remaining) AS t
        WHERE NOT EXISTS (SELECT 1 FROM pg_constraint AS f
                          WHERE f.contype = 'f' AND f.confrelid = t AND f.conrelid <> t
                            AND f.conrelid = ANY (remaining))
        ORDER BY t::text LIMIT 1;
        IF chosen IS NULL THEN
            RAISE EXCEPTION 'the foreign keys among % form a cycle', remaining;
        END IF;
        EXECUTE format('DELETE FROM %s WHERE tenant_id = $1', chosen) USING p_tenant_id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        counts := counts || jsonb_build_object(chosen::text, deleted);
        remaining := array_remove(remaining, chosen);
    END LOOP;
    DELETE FROM tenant_deleting WHERE tenant_id = p_tenant_id;
    -- The service's note of the tenant's records at its last ANALYZE (no tenant_id column there:
    -- it stays on the coordinator under Citus).
    DELETE FROM statistics_analyzed WHERE tenant = p_tenant_id;
    receipt := jsonb_build_object('tenant_id', p_tenant_id, 'rows', counts,
                                  'last_checkpoint', last_checkpoint,
                                  'deleted_at', clock_timestamp());
    INSERT INTO operator_audit (action, target, detail)
    VALUES ('tenant_delete', p_tenant_id, receipt);
    PERFORM pg_notify('lineage_keys', '');
    RETURN receipt;
END
$_$;

CREATE FUNCTION public.lineage_get_contexts(p_tenant_id text, p_context_ids text[], p_token text, p_audit jsonb DEFAULT NULL::jsonb) RETURNS TABLE(tenant_id text, context_id text, parent_ids text[], kind text, source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $_$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: get_contexts
    SELECT tenant_id, context_id, parent_ids, kind, source_uri, content_hash, transform,
           transform_version, produced_by, index_snapshot, trace_id, created_at, attributes
    FROM public.provenance
    WHERE tenant_id = $1 AND context_id = ANY ($2::text[])
    -- end statement: get_contexts
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$_$;

CREATE FUNCTION public.lineage_key(p_key_id text) RETURNS TABLE(tenant_id text, scope text, key_hash bytea, revoked boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY
    SELECT k.tenant_id, k.scope, k.key_hash, k.revoked_at IS NOT NULL
    FROM public.api_keys AS k WHERE k.key_id OPERATOR(pg_catalog.=) p_key_id;
END
$$;

CREATE FUNCTION public.lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text) RETURNS TABLE(key_id text, tenant_id text, scope text, label text, created_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    tenant text := public.lineage_vouched_tenant();
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.tenants AS t
                   WHERE t.tenant_id OPERATOR(pg_catalog.=) tenant) THEN
        RAISE EXCEPTION 'no tenant %', tenant USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN QUERY
    INSERT INTO public.api_keys AS k (key_id, tenant_id, scope, key_hash, label)
    VALUES (p_key_id, tenant, p_scope, p_key_hash, nullif(p_label, ''))
    RETURNING k.key_id, k.tenant_id, k.scope, k.label, k.created_at;
END
$$;

CREATE FUNCTION public.lineage_key_revoke(p_key_id text) RETURNS TABLE(key_id text, revoked_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    tenant text := public.lineage_vouched_tenant();
BEGIN
    UPDATE public.api_keys AS k SET revoked_at = pg_catalog.now()
    WHERE k.tenant_id OPERATOR(pg_catalog.=) tenant AND k.key_id OPERATOR(pg_catalog.=) p_key_id
      AND k.revoked_at IS NULL;
    RETURN QUERY
    SELECT k.key_id, k.revoked_at FROM public.api_keys AS k
    WHERE k.tenant_id OPERATOR(pg_catalog.=) tenant AND k.key_id OPERATOR(pg_catalog.=) p_key_id;
    IF FOUND THEN  -- a key already revoked too: revoked here before migration 0025, none was told
        PERFORM pg_catalog.pg_notify('lineage_keys', '');
    END IF;
END
$$;

CREATE FUNCTION public.lineage_list_contexts(p_tenant_id text, p_kind text, p_source_uri text, p_trace_id text, p_produced_by text, p_session_id text, p_since timestamp with time zone, p_until timestamp with time zone, p_after_created_at timestamp with time zone, p_after_context_id text, p_page_size bigint, p_token text, p_audit jsonb DEFAULT NULL::jsonb) RETURNS TABLE(context_id text, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $_$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: list_contexts
    SELECT r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
           r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
           r.attributes
    FROM public.provenance AS r
    WHERE r.tenant_id = $1
      AND ($2 IN ('any', 'all') OR r.kind = $2)
      AND ($3 = 'any' OR r.source_uri = $3)
      AND ($4 = 'any' OR r.trace_id = $4)
      AND ($5 = 'any' OR r.produced_by = $5)
      AND ($6 = 'any' OR r.attributes ->> 'session_id' = $6)
      AND $7::timestamptz < $8::timestamptz AND r.created_at < $8::timestamptz
      AND (r.created_at, r.context_id)
          > (greatest($9::timestamptz, $7::timestamptz),
             CASE WHEN $9::timestamptz >= $7::timestamptz
                  THEN $10::text ELSE '' END)
    ORDER BY r.created_at, r.context_id
    LIMIT $11
    -- end statement: list_contexts
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$_$;

CREATE FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

CREATE FUNCTION public.lineage_log_lock(p_tenant text, p_token text) RETURNS TABLE(tree_size bigint, root_hash bytea, updated_at timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant, true);
    RETURN QUERY
    INSERT INTO public.log_heads AS h (tenant_id) VALUES (p_tenant)
    ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = h.tenant_id
    RETURNING h.tree_size, h.root_hash, h.updated_at;
END
$$;

CREATE FUNCTION public.lineage_open_partitions_check(p_now timestamp with time zone, p_add boolean) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    open record;
    parent text;
    until timestamptz := date_trunc('month', p_now, 'UTC') + interval '1 month';
    changed int := 0;
BEGIN
    SELECT p.* INTO open FROM public.lineage_partitions('public.provenance') AS p
    WHERE p.upper = 'infinity';
    IF open.partition IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH parent IN ARRAY public.lineage_partitioned_tables() LOOP
        EXECUTE format('ALTER TABLE public.%I DROP CONSTRAINT IF EXISTS %I',
                       parent || open.suffix, parent || open.suffix || '_closing');
        IF p_add THEN
            EXECUTE format('ALTER TABLE public.%I ADD CONSTRAINT %I '
                           'CHECK (created_at >= %L AND created_at < %L) NOT VALID',
                           parent || open.suffix, parent || open.suffix || '_closing',
                           open.lower, until);
        END IF;
        changed := changed + 1;
    END LOOP;
    RETURN changed;
END
$$;

CREATE FUNCTION public.lineage_open_partitions_validate() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

CREATE FUNCTION public.lineage_partitioned_tables() RETURNS text[]
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT ARRAY['provenance', 'provenance_children', 'invalidation_postings']
$$;

CREATE FUNCTION public.lineage_partitions(p_parent regclass) RETURNS TABLE(partition text, suffix text, lower timestamp with time zone, upper timestamp with time zone)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT c.relname::text, substr(c.relname, length(p.relname) + 1),
           CASE b.bound[1] WHEN 'MINVALUE' THEN '-infinity'
                ELSE btrim(b.bound[1], '''') END::timestamptz,
           CASE b.bound[2] WHEN 'MAXVALUE' THEN 'infinity'
                ELSE btrim(b.bound[2], '''') END::timestamptz
    FROM pg_inherits AS i
    JOIN pg_class AS c ON c.oid = i.inhrelid
    JOIN pg_class AS p ON p.oid = i.inhparent
    CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                    'FROM \((.+)\) TO \((.+)\)') AS b (bound)
    WHERE i.inhparent = p_parent
    ORDER BY 3
$$;

CREATE FUNCTION public.lineage_partitions_shape(p_now timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    parents text[] := public.lineage_partitioned_tables();
    keep int := (SELECT r.keep_months FROM public.retention_policy AS r);
    open record;
    parent text;
    anything boolean := false;
    until timestamptz := date_trunc('month', p_now, 'UTC') + interval '1 month';
    closed text := '_p_until_' || to_char(until AT TIME ZONE 'UTC', 'YYYY_MM');
    after timestamptz;
    done jsonb := '{}';
BEGIN
    SELECT p.* INTO open FROM public.lineage_partitions('public.provenance') AS p
    WHERE p.upper = 'infinity';
    IF keep IS NOT NULL AND open.partition IS NOT NULL THEN
        FOREACH parent IN ARRAY parents LOOP
            EXECUTE format('SELECT $1 OR EXISTS (SELECT 1 FROM public.%I)', parent || open.suffix)
                INTO anything USING anything;
        END LOOP;
        FOREACH parent IN ARRAY parents LOOP
            IF anything THEN
                EXECUTE format('ALTER TABLE public.%I DETACH PARTITION public.%I',
                               parent, parent || open.suffix);
                EXECUTE format('ALTER TABLE public.%I RENAME TO %I', parent || open.suffix,
                               parent || closed);
                IF parent = 'provenance' THEN
                    EXECUTE format('ALTER INDEX public.%I RENAME TO %I',
                                   parent || open.suffix || '_id', parent || closed || '_id');
                END IF;
                EXECUTE format('ALTER TABLE public.%I ATTACH PARTITION public.%I '
                               'FOR VALUES FROM (%s) TO (%L)', parent, parent || closed,
                               CASE WHEN open.lower = '-infinity' THEN 'MINVALUE'
                                    ELSE quote_literal(open.lower) END, until);
                EXECUTE format('ALTER TABLE public.%I DROP CONSTRAINT IF EXISTS %I',
                               parent || closed, parent || open.suffix || '_closing');
            ELSE
                EXECUTE format('DROP TABLE public.%I', parent || open.suffix);
            END IF;
        END LOOP;
        done := jsonb_build_object(CASE WHEN anything THEN 'closed' ELSE 'dropped' END,
                                   open.partition, 'until', CASE WHEN anything THEN until END);
    ELSIF keep IS NULL AND open.partition IS NULL THEN
        SELECT coalesce(max(p.upper), '-infinity') INTO after
        FROM public.lineage_partitions('public.provenance') AS p;
        FOREACH parent IN ARRAY parents LOOP
            PERFORM public.lineage_create_partition(parent, parent || '_p_open', after, 'infinity');
        END LOOP;
        done := jsonb_build_object('opened', 'provenance_p_open', 'from', after);
    END IF;
    RETURN done || jsonb_build_object(
        'partitions_added', public.lineage_add_partitions(p_now, p_now + interval '2 months'));
END
$_$;

CREATE FUNCTION public.lineage_postings_merge(p_tenant text, p_records integer) RETURNS TABLE(records bigint, rows_merged bigint, rows_written bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

CREATE FUNCTION public.lineage_postings_merge_keys(p_tenant text, p_keys integer[]) RETURNS TABLE(rows_merged bigint, rows_written bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

CREATE FUNCTION public.lineage_postings_pending() RETURNS SETOF text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY
    SELECT c.tenant_id
    FROM public.tenant_counters AS c
    LEFT JOIN public.tenant_counters AS m
           ON m.tenant_id = c.tenant_id AND m.counter = 'postings_merged'
    WHERE c.counter = 'events' AND c.last_value > coalesce(m.last_value, 0);
END
$$;

CREATE FUNCTION public.lineage_read_begin(p_tenant_id text, p_token text, p_audit jsonb) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    found_bound text := pg_catalog.current_setting('lineage.tenant_id', true);
BEGIN
    IF NOT public.lineage_tenant_vouched(p_tenant_id, p_token) THEN
        RAISE EXCEPTION 'tenant % is not vouched for by the token given', p_tenant_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_catalog.set_config('lineage.tenant_id', p_tenant_id, true);
    IF p_audit IS NOT NULL THEN
        PERFORM public.lineage_audit_append(
            p_tenant_id, (p_audit ->> 'at')::timestamptz, p_audit ->> 'key_id',
            p_audit ->> 'action', p_audit ->> 'target', p_audit -> 'detail');
    END IF;
    RETURN found_bound;
END
$$;

CREATE FUNCTION public.lineage_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- to_jsonb: a table without tenant_id (operator_audit) is never deleted from.
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM tenant_deleting AS d
                                    WHERE d.tenant_id = to_jsonb(OLD) ->> 'tenant_id') THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE FUNCTION public.lineage_retention_apply(p_now timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
$_$;

CREATE FUNCTION public.lineage_session_tenant() RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF current_user = 'lineage_app' THEN
        IF coalesce(tenant, '') = '' THEN
            RAISE EXCEPTION 'lineage.tenant_id is not set: row security hides every record'
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'BEGIN; SET LOCAL lineage.tenant_id = ''<tenant>''; '
                             'SET LOCAL lineage.tenant_token = ''<token>''; then the query';
        END IF;
        IF NOT public.lineage_tenant_vouched(tenant, current_setting('lineage.tenant_token', true))
        THEN
            RAISE EXCEPTION 'lineage.tenant_id is not vouched for by lineage.tenant_token'
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'the service sets both; `lineage tenant token <tenant>` prints '
                             'the token for psql';
        END IF;
    END IF;
    RETURN tenant;
END
$$;

CREATE FUNCTION public.lineage_statistics_analyzed() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    tenants text[];
    counts bigint[];
BEGIN
    SELECT coalesce(array_agg(c.tenant_id), '{}'), coalesce(array_agg(c.last_value), '{}')
    INTO tenants, counts
    FROM public.tenant_counters AS c
    WHERE c.counter = 'events';
    DELETE FROM public.statistics_analyzed AS s WHERE s.tenant <> ALL (tenants);
    -- Upserted: two replicas' rounds may both get here.
    INSERT INTO public.statistics_analyzed AS s (tenant, records, analyzed_at)
    SELECT t.tenant_id, t.records, now()
    FROM unnest(tenants, counts) AS t (tenant_id, records)
    ON CONFLICT (tenant) DO UPDATE SET records = excluded.records, analyzed_at = excluded.analyzed_at;
END
$$;

CREATE FUNCTION public.lineage_statistics_due(p_from bigint, p_factor double precision) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    tenants text[];
    counts bigint[];
BEGIN
    -- Read apart from the coordinator's own table: on Citus the counters are distributed.
    SELECT coalesce(array_agg(c.tenant_id), '{}'), coalesce(array_agg(c.last_value), '{}')
    INTO tenants, counts
    FROM public.tenant_counters AS c
    WHERE c.counter = 'events' AND c.last_value >= p_from;
    RETURN EXISTS (
        SELECT 1
        FROM unnest(tenants, counts) AS t (tenant_id, records)
        LEFT JOIN public.statistics_analyzed AS s ON s.tenant = t.tenant_id
        WHERE s.records IS NULL OR t.records >= s.records * p_factor OR t.records < s.records
    );
END
$$;

CREATE FUNCTION public.lineage_statistics_tables() RETURNS text[]
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT ARRAY['provenance', 'provenance_children', 'invalidation_postings', 'events',
                 'log_leaves', 'log_nodes']
$$;

CREATE FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    pads record;
BEGIN
    IF to_regclass('public.tenant_vouching_key') IS NULL THEN
        RAISE EXCEPTION 'this node (port %) has no tenant vouching key', current_setting('port')
            USING ERRCODE = 'operator_intervention',
                  HINT = 'run `lineage distribute` after adding a worker (runbooks/scale-out.md)';
    END IF;
    SELECT k.inner_pad, k.outer_pad INTO pads FROM public.tenant_vouching_key AS k;
    IF pads IS NULL OR p_token IS NULL THEN
        RETURN false;
    END IF;
    RETURN sha256(convert_to(p_token, 'UTF8')) OPERATOR(pg_catalog.=) sha256(convert_to(
        encode(sha256(pads.outer_pad OPERATOR(pg_catalog.||) sha256(
            pads.inner_pad OPERATOR(pg_catalog.||) convert_to(p_tenant, 'UTF8'))), 'hex'),
        'UTF8'));
END
$$;

CREATE FUNCTION public.lineage_trace_contexts(p_tenant_id text, p_trace_id text, p_token text, p_audit jsonb DEFAULT NULL::jsonb) RETURNS TABLE(context_id text, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $_$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: trace_contexts
    SELECT r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
           r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
           r.attributes
    FROM public.provenance AS r
    WHERE r.tenant_id = $1 AND r.trace_id = $2
    ORDER BY r.created_at, r.context_id
    -- end statement: trace_contexts
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$_$;

CREATE FUNCTION public.lineage_vouched_tenant() RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF coalesce(tenant, '') = ''
       OR NOT public.lineage_tenant_vouched(tenant, current_setting('lineage.tenant_token', true))
    THEN
        RAISE EXCEPTION 'lineage.tenant_id is not set or not vouched for by lineage.tenant_token'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN tenant;
END
$$;

CREATE FUNCTION public.lineage_walk_back(p_context_id text, p_tenant_id text, p_max_depth integer, p_token text, p_audit jsonb DEFAULT NULL::jsonb) RETURNS TABLE(context_id text, depth integer, kind text, parent_ids text[], source_uri text, content_hash text, transform text, transform_version text, produced_by text, index_snapshot text, trace_id text, created_at timestamp with time zone, attributes jsonb, truncated boolean, expired boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $_$
#variable_conflict use_column
DECLARE
    found_bound text := public.lineage_read_begin(p_tenant_id, p_token, p_audit);
BEGIN
    RETURN QUERY
    -- statement: walk_back
    WITH RECURSIVE walk (depth, frontier, seen, found) AS (
        SELECT 0, ARRAY[$1], ARRAY[$1],
               ARRAY(SELECT c FROM public.provenance AS c WHERE c.tenant_id = $2 AND false)
      UNION ALL
        SELECT w.depth + 1, step.ids, w.seen || step.ids, step.found
        FROM walk AS w
        CROSS JOIN LATERAL (
            SELECT level.found, ARRAY(
                SELECT parent.id
                FROM unnest(level.found) AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
                EXCEPT
                SELECT unnest(w.seen)
            ) AS ids
            FROM (SELECT ARRAY(SELECT c FROM public.provenance AS c
                               WHERE c.tenant_id = $2 AND c.context_id = ANY (w.frontier))
                         AS found
                  OFFSET 0) AS level
            OFFSET 0  -- evaluate the step once, not once per use of its result
        ) AS step
        WHERE w.depth <= $3 AND cardinality(w.frontier) > 0
    )
    SELECT r.context_id, a.depth - 1 AS depth, r.kind, r.parent_ids, r.source_uri, r.content_hash,
           r.transform, r.transform_version, r.produced_by, r.index_snapshot, r.trace_id,
           r.created_at, r.attributes,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = $3 + 1), false) AS truncated,
           count(*) OVER () < (SELECT sum(cardinality(b.frontier)) FROM walk AS b
                               WHERE b.depth <= $3) AS expired
    FROM walk AS a
    CROSS JOIN LATERAL unnest(a.found) AS r
    ORDER BY a.depth, r.context_id COLLATE "C"
    -- end statement: walk_back
    ;
    PERFORM pg_catalog.set_config('lineage.tenant_id', coalesce(found_bound, ''), true);
END
$_$;

CREATE FUNCTION public.log_pending_tenants() RETURNS SETOF text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN QUERY
    SELECT c.tenant_id
    FROM public.tenant_counters AS c
    LEFT JOIN public.log_heads AS h ON h.tenant_id = c.tenant_id
    WHERE c.counter = 'events' AND c.last_value > coalesce(h.events_logged, 0);
END
$$;

CREATE FUNCTION public.provenance_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE'
       AND EXISTS (SELECT 1 FROM tenant_deleting AS d WHERE d.tenant_id = OLD.tenant_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'provenance is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'record what changed as a new record derived from the old one';
END
$$;

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);

CREATE TABLE public.api_keys (
    key_id text NOT NULL,
    tenant_id text NOT NULL,
    scope text NOT NULL,
    key_hash bytea NOT NULL,
    label text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT api_keys_scope_check CHECK ((scope = ANY (ARRAY['ingest'::text, 'read'::text, 'verify'::text, 'admin'::text])))
);

ALTER TABLE ONLY public.api_keys FORCE ROW LEVEL SECURITY;

CREATE TABLE public.audit_log (
    tenant_id text NOT NULL,
    audit_id bigint NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    key_id text,
    action text NOT NULL,
    target text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL
);

ALTER TABLE ONLY public.audit_log FORCE ROW LEVEL SECURITY;

CREATE TABLE public.context_text (
    tenant_id text NOT NULL,
    context_id text NOT NULL,
    text text NOT NULL,
    captured_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.context_text FORCE ROW LEVEL SECURITY;

CREATE TABLE public.events (
    tenant_id text NOT NULL,
    "position" bigint NOT NULL,
    context_id text NOT NULL,
    CONSTRAINT events_position_check CHECK (("position" > 0))
);

ALTER TABLE ONLY public.events FORCE ROW LEVEL SECURITY;

CREATE TABLE public.forget_tombstones (
    tenant_id text NOT NULL,
    context_id text NOT NULL,
    parent_ids text[] NOT NULL,
    kind text NOT NULL,
    source_uri text,
    content_hash text NOT NULL,
    transform text,
    transform_version text,
    produced_by text,
    index_snapshot text,
    trace_id text,
    created_at timestamp with time zone NOT NULL,
    attributes jsonb NOT NULL,
    key_id text,
    signature bytea
);

ALTER TABLE ONLY public.forget_tombstones FORCE ROW LEVEL SECURITY;

CREATE TABLE public.invalidation_keys (
    tenant_id text NOT NULL,
    key_no integer NOT NULL,
    key text NOT NULL
);

ALTER TABLE ONLY public.invalidation_keys FORCE ROW LEVEL SECURITY;

CREATE TABLE public.invalidation_postings (
    tenant_id text NOT NULL,
    kind text NOT NULL,
    depth integer NOT NULL,
    created_at timestamp with time zone NOT NULL,
    context_ids text[],
    key_no integer NOT NULL,
    context_uuids uuid[]
)
PARTITION BY RANGE (created_at);

ALTER TABLE ONLY public.invalidation_postings FORCE ROW LEVEL SECURITY;

CREATE TABLE public.invalidation_postings_p_open (
    tenant_id text NOT NULL,
    kind text NOT NULL,
    depth integer NOT NULL,
    created_at timestamp with time zone NOT NULL,
    context_ids text[],
    key_no integer NOT NULL,
    context_uuids uuid[]
);

ALTER TABLE ONLY public.invalidation_postings_p_open REPLICA IDENTITY FULL;

CREATE TABLE public.log_checkpoints (
    tenant_id text NOT NULL,
    tree_size bigint NOT NULL,
    root_hash bytea NOT NULL,
    signed_at timestamp with time zone NOT NULL,
    note text NOT NULL
);

ALTER TABLE ONLY public.log_checkpoints FORCE ROW LEVEL SECURITY;

CREATE TABLE public.log_heads (
    tenant_id text NOT NULL,
    tree_size bigint DEFAULT 0 NOT NULL,
    root_hash bytea DEFAULT sha256('\x'::bytea) NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    events_logged bigint DEFAULT 0 NOT NULL,
    CONSTRAINT log_heads_events_logged_check CHECK ((events_logged >= 0))
);

ALTER TABLE ONLY public.log_heads FORCE ROW LEVEL SECURITY;

CREATE TABLE public.log_leaves (
    tenant_id text NOT NULL,
    leaf_index bigint NOT NULL,
    context_id text NOT NULL,
    created_at timestamp with time zone,
    hash bytea,
    CONSTRAINT log_leaves_leaf_index_check CHECK ((leaf_index >= 0))
);

ALTER TABLE ONLY public.log_leaves FORCE ROW LEVEL SECURITY;

CREATE TABLE public.log_nodes (
    tenant_id text NOT NULL,
    level smallint NOT NULL,
    node_index bigint NOT NULL,
    hash bytea NOT NULL,
    CONSTRAINT log_nodes_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT log_nodes_kept_levels CHECK (((level > 0) AND (mod((level)::integer, 4) = 0))),
    CONSTRAINT log_nodes_level_check CHECK (((level >= 0) AND (level <= 62))),
    CONSTRAINT log_nodes_node_index_check CHECK ((node_index >= 0))
);

ALTER TABLE ONLY public.log_nodes FORCE ROW LEVEL SECURITY;

CREATE TABLE public.operator_audit (
    audit_id bigint NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    operator text DEFAULT SESSION_USER NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL
);

ALTER TABLE public.operator_audit ALTER COLUMN audit_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.operator_audit_audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.provenance (
    tenant_id text NOT NULL,
    context_id text NOT NULL,
    parent_ids text[] DEFAULT '{}'::text[] NOT NULL,
    kind text NOT NULL,
    source_uri text,
    content_hash text NOT NULL,
    transform text,
    transform_version text,
    produced_by text,
    index_snapshot text,
    trace_id text,
    created_at timestamp with time zone NOT NULL,
    attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    upstream_depths integer[],
    root_depths integer[],
    key_id text,
    signature bytea,
    upstream_keys integer[],
    root_sources integer[]
)
PARTITION BY RANGE (created_at);

ALTER TABLE ONLY public.provenance FORCE ROW LEVEL SECURITY;

CREATE TABLE public.provenance_children (
    tenant_id text NOT NULL,
    context_id text,
    created_at timestamp with time zone NOT NULL,
    kind text NOT NULL,
    parent_key uuid NOT NULL,
    context_uuid uuid,
    CONSTRAINT provenance_children_id CHECK (((context_uuid IS NULL) <> (context_id IS NULL)))
)
PARTITION BY RANGE (created_at);

ALTER TABLE ONLY public.provenance_children FORCE ROW LEVEL SECURITY;

CREATE TABLE public.provenance_children_p_open (
    tenant_id text NOT NULL,
    context_id text,
    created_at timestamp with time zone NOT NULL,
    kind text NOT NULL,
    parent_key uuid NOT NULL,
    context_uuid uuid,
    CONSTRAINT provenance_children_id CHECK (((context_uuid IS NULL) <> (context_id IS NULL)))
);

ALTER TABLE ONLY public.provenance_children_p_open REPLICA IDENTITY FULL;

CREATE TABLE public.provenance_p_open (
    tenant_id text NOT NULL,
    context_id text NOT NULL,
    parent_ids text[] DEFAULT '{}'::text[] NOT NULL,
    kind text NOT NULL,
    source_uri text,
    content_hash text NOT NULL,
    transform text,
    transform_version text,
    produced_by text,
    index_snapshot text,
    trace_id text,
    created_at timestamp with time zone NOT NULL,
    attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    upstream_depths integer[],
    root_depths integer[],
    key_id text,
    signature bytea,
    upstream_keys integer[],
    root_sources integer[]
);

CREATE TABLE public.retention_policy (
    only_row boolean DEFAULT true NOT NULL,
    keep_months integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT retention_policy_keep_months_check CHECK ((keep_months > 0)),
    CONSTRAINT retention_policy_only_row_check CHECK (only_row)
);

CREATE TABLE public.spans (
    tenant_id text NOT NULL,
    trace_id text NOT NULL,
    span_id text NOT NULL,
    parent_span_id text,
    name text NOT NULL,
    span_kind text NOT NULL,
    service_name text,
    start_time timestamp with time zone NOT NULL,
    end_time timestamp with time zone NOT NULL,
    status_code text NOT NULL,
    status_message text,
    attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.spans FORCE ROW LEVEL SECURITY;

CREATE TABLE public.statistics_analyzed (
    tenant text NOT NULL,
    records bigint NOT NULL,
    analyzed_at timestamp with time zone NOT NULL,
    CONSTRAINT statistics_analyzed_records_check CHECK ((records >= 0))
);

CREATE TABLE public.tenant_counters (
    tenant_id text NOT NULL,
    counter text NOT NULL,
    last_value bigint NOT NULL,
    CONSTRAINT tenant_counters_counter_check CHECK ((counter = ANY (ARRAY['events'::text, 'audit'::text, 'postings_merged'::text]))),
    CONSTRAINT tenant_counters_last_value_check CHECK ((last_value >= 0))
);

ALTER TABLE ONLY public.tenant_counters FORCE ROW LEVEL SECURITY;

CREATE TABLE public.tenant_deleting (
    tenant_id text NOT NULL
);

CREATE TABLE public.tenant_expiry (
    tenant_id text NOT NULL,
    expired_before timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.tenant_expiry FORCE ROW LEVEL SECURITY;

CREATE TABLE public.tenant_settings (
    tenant_id text NOT NULL,
    capture_source_text boolean DEFAULT false NOT NULL,
    capture_query_text boolean DEFAULT false NOT NULL,
    capture_answer_text boolean DEFAULT false NOT NULL,
    text_hash_key bytea DEFAULT sha256(convert_to(((gen_random_uuid())::text || (gen_random_uuid())::text), 'UTF8'::name)) NOT NULL
);

ALTER TABLE ONLY public.tenant_settings FORCE ROW LEVEL SECURITY;

CREATE TABLE public.tenant_text_keys (
    tenant_id text NOT NULL,
    text_hash_key bytea NOT NULL
);

ALTER TABLE ONLY public.tenant_text_keys FORCE ROW LEVEL SECURITY;

CREATE TABLE public.tenant_vouching_key (
    only_row boolean DEFAULT true NOT NULL,
    key bytea NOT NULL,
    inner_pad bytea NOT NULL,
    outer_pad bytea NOT NULL,
    CONSTRAINT tenant_vouching_key_inner_pad_check CHECK ((length(inner_pad) = 64)),
    CONSTRAINT tenant_vouching_key_key_check CHECK ((length(key) = 32)),
    CONSTRAINT tenant_vouching_key_only_row_check CHECK (only_row),
    CONSTRAINT tenant_vouching_key_outer_pad_check CHECK ((length(outer_pad) = 64))
);

CREATE TABLE public.tenants (
    tenant_id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.tenants FORCE ROW LEVEL SECURITY;

CREATE TABLE public.transform_versions (
    tenant_id text NOT NULL,
    transform text NOT NULL,
    transform_version text NOT NULL,
    version_key text COLLATE pg_catalog."C",
    first_seen timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.transform_versions FORCE ROW LEVEL SECURITY;

ALTER TABLE ONLY public.invalidation_postings ATTACH PARTITION public.invalidation_postings_p_open FOR VALUES FROM (MINVALUE) TO (MAXVALUE);

ALTER TABLE ONLY public.provenance_children ATTACH PARTITION public.provenance_children_p_open FOR VALUES FROM (MINVALUE) TO (MAXVALUE);

ALTER TABLE ONLY public.provenance ATTACH PARTITION public.provenance_p_open FOR VALUES FROM (MINVALUE) TO (MAXVALUE);

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (tenant_id, audit_id);

ALTER TABLE ONLY public.context_text
    ADD CONSTRAINT context_text_pkey PRIMARY KEY (tenant_id, context_id);

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey1 PRIMARY KEY (tenant_id, "position");

ALTER TABLE ONLY public.forget_tombstones
    ADD CONSTRAINT forget_tombstones_pkey PRIMARY KEY (tenant_id, context_id);

ALTER TABLE ONLY public.invalidation_keys
    ADD CONSTRAINT invalidation_keys_pkey PRIMARY KEY (tenant_id, key_no);

ALTER TABLE ONLY public.invalidation_keys
    ADD CONSTRAINT invalidation_keys_tenant_id_key_key UNIQUE (tenant_id, key);

ALTER TABLE ONLY public.log_checkpoints
    ADD CONSTRAINT log_checkpoints_pkey PRIMARY KEY (tenant_id, tree_size);

ALTER TABLE ONLY public.log_heads
    ADD CONSTRAINT log_heads_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY public.log_leaves
    ADD CONSTRAINT log_leaves_pkey PRIMARY KEY (tenant_id, leaf_index);

ALTER TABLE ONLY public.log_leaves
    ADD CONSTRAINT log_leaves_tenant_id_context_id_key UNIQUE (tenant_id, context_id);

ALTER TABLE ONLY public.log_nodes
    ADD CONSTRAINT log_nodes_pkey PRIMARY KEY (tenant_id, level, node_index);

ALTER TABLE ONLY public.operator_audit
    ADD CONSTRAINT operator_audit_pkey PRIMARY KEY (audit_id);

ALTER TABLE ONLY public.retention_policy
    ADD CONSTRAINT retention_policy_pkey PRIMARY KEY (only_row);

ALTER TABLE ONLY public.spans
    ADD CONSTRAINT spans_pkey PRIMARY KEY (tenant_id, trace_id, span_id);

ALTER TABLE ONLY public.statistics_analyzed
    ADD CONSTRAINT statistics_analyzed_pkey PRIMARY KEY (tenant);

ALTER TABLE ONLY public.tenant_counters
    ADD CONSTRAINT tenant_counters_pkey PRIMARY KEY (tenant_id, counter);

ALTER TABLE ONLY public.tenant_deleting
    ADD CONSTRAINT tenant_deleting_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY public.tenant_expiry
    ADD CONSTRAINT tenant_expiry_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY public.tenant_settings
    ADD CONSTRAINT tenant_settings_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY public.tenant_text_keys
    ADD CONSTRAINT tenant_text_keys_pkey PRIMARY KEY (tenant_id, text_hash_key);

ALTER TABLE ONLY public.tenant_vouching_key
    ADD CONSTRAINT tenant_vouching_key_pkey PRIMARY KEY (only_row);

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY public.transform_versions
    ADD CONSTRAINT transform_versions_pkey PRIMARY KEY (tenant_id, transform, transform_version);

CREATE INDEX api_keys_tenant ON public.api_keys USING btree (tenant_id, created_at);

CREATE INDEX invalidation_postings_key ON ONLY public.invalidation_postings USING btree (tenant_id, key_no, kind, depth);

CREATE INDEX invalidation_postings_p_open_tenant_id_key_no_kind_depth_idx ON public.invalidation_postings_p_open USING btree (tenant_id, key_no, kind, depth);

CREATE INDEX provenance_children_parent ON ONLY public.provenance_children USING btree (tenant_id, parent_key);

CREATE INDEX provenance_children_p_open_tenant_id_parent_key_idx ON public.provenance_children_p_open USING btree (tenant_id, parent_key);

CREATE INDEX provenance_content_hash ON ONLY public.provenance USING hash (content_hash);

CREATE INDEX provenance_created_at ON ONLY public.provenance USING btree (tenant_id, created_at, context_id);

CREATE INDEX provenance_index_snapshot ON ONLY public.provenance USING btree (tenant_id, index_snapshot, created_at) WHERE (index_snapshot IS NOT NULL);

CREATE INDEX provenance_p_open_content_hash_idx ON public.provenance_p_open USING hash (content_hash);

CREATE UNIQUE INDEX provenance_p_open_id ON public.provenance_p_open USING btree (tenant_id, context_id);

ALTER TABLE ONLY public.provenance_p_open REPLICA IDENTITY USING INDEX provenance_p_open_id;

CREATE INDEX provenance_p_open_tenant_id_created_at_context_id_idx ON public.provenance_p_open USING btree (tenant_id, created_at, context_id);

CREATE INDEX provenance_tombstones ON ONLY public.provenance USING btree (tenant_id) WHERE (kind = 'tombstone'::text);

CREATE INDEX provenance_p_open_tenant_id_idx ON public.provenance_p_open USING btree (tenant_id) WHERE (kind = 'tombstone'::text);

CREATE INDEX provenance_upstream_unknown ON ONLY public.provenance USING btree (tenant_id) WHERE (upstream_keys IS NULL);

CREATE INDEX provenance_p_open_tenant_id_idx1 ON public.provenance_p_open USING btree (tenant_id) WHERE (upstream_keys IS NULL);

CREATE INDEX provenance_p_open_tenant_id_index_snapshot_created_at_idx ON public.provenance_p_open USING btree (tenant_id, index_snapshot, created_at) WHERE (index_snapshot IS NOT NULL);

CREATE INDEX provenance_produced_by ON ONLY public.provenance USING btree (tenant_id, produced_by, created_at) WHERE (produced_by IS NOT NULL);

CREATE INDEX provenance_p_open_tenant_id_produced_by_created_at_idx ON public.provenance_p_open USING btree (tenant_id, produced_by, created_at) WHERE (produced_by IS NOT NULL);

CREATE INDEX provenance_source_uri ON ONLY public.provenance USING btree (tenant_id, source_uri, created_at) WHERE (source_uri IS NOT NULL);

CREATE INDEX provenance_p_open_tenant_id_source_uri_created_at_idx ON public.provenance_p_open USING btree (tenant_id, source_uri, created_at) WHERE (source_uri IS NOT NULL);

CREATE INDEX provenance_trace_id ON ONLY public.provenance USING btree (tenant_id, trace_id) WHERE (trace_id IS NOT NULL);

CREATE INDEX provenance_p_open_tenant_id_trace_id_idx ON public.provenance_p_open USING btree (tenant_id, trace_id) WHERE (trace_id IS NOT NULL);

CREATE INDEX provenance_transform_version ON ONLY public.provenance USING btree (tenant_id, transform_version) WHERE (transform_version IS NOT NULL);

CREATE INDEX provenance_p_open_tenant_id_transform_version_idx ON public.provenance_p_open USING btree (tenant_id, transform_version) WHERE (transform_version IS NOT NULL);

ALTER INDEX public.invalidation_postings_key ATTACH PARTITION public.invalidation_postings_p_open_tenant_id_key_no_kind_depth_idx;

ALTER INDEX public.provenance_children_parent ATTACH PARTITION public.provenance_children_p_open_tenant_id_parent_key_idx;

ALTER INDEX public.provenance_content_hash ATTACH PARTITION public.provenance_p_open_content_hash_idx;

ALTER INDEX public.provenance_created_at ATTACH PARTITION public.provenance_p_open_tenant_id_created_at_context_id_idx;

ALTER INDEX public.provenance_tombstones ATTACH PARTITION public.provenance_p_open_tenant_id_idx;

ALTER INDEX public.provenance_upstream_unknown ATTACH PARTITION public.provenance_p_open_tenant_id_idx1;

ALTER INDEX public.provenance_index_snapshot ATTACH PARTITION public.provenance_p_open_tenant_id_index_snapshot_created_at_idx;

ALTER INDEX public.provenance_produced_by ATTACH PARTITION public.provenance_p_open_tenant_id_produced_by_created_at_idx;

ALTER INDEX public.provenance_source_uri ATTACH PARTITION public.provenance_p_open_tenant_id_source_uri_created_at_idx;

ALTER INDEX public.provenance_trace_id ATTACH PARTITION public.provenance_p_open_tenant_id_trace_id_idx;

ALTER INDEX public.provenance_transform_version ATTACH PARTITION public.provenance_p_open_tenant_id_transform_version_idx;

CREATE TRIGGER audit_log_append_only BEFORE DELETE OR UPDATE ON public.audit_log FOR EACH ROW EXECUTE FUNCTION public.lineage_refuse_change();

ALTER TABLE public.audit_log ENABLE ALWAYS TRIGGER audit_log_append_only;

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON public.audit_log FOR EACH STATEMENT EXECUTE FUNCTION public.lineage_refuse_change();

ALTER TABLE public.audit_log ENABLE ALWAYS TRIGGER audit_log_no_truncate;

CREATE TRIGGER operator_audit_append_only BEFORE DELETE OR UPDATE ON public.operator_audit FOR EACH ROW EXECUTE FUNCTION public.lineage_refuse_change();

ALTER TABLE public.operator_audit ENABLE ALWAYS TRIGGER operator_audit_append_only;

CREATE TRIGGER operator_audit_no_truncate BEFORE TRUNCATE ON public.operator_audit FOR EACH STATEMENT EXECUTE FUNCTION public.lineage_refuse_change();

ALTER TABLE public.operator_audit ENABLE ALWAYS TRIGGER operator_audit_no_truncate;

CREATE TRIGGER provenance_append_only BEFORE DELETE OR UPDATE ON public.provenance FOR EACH ROW EXECUTE FUNCTION public.provenance_refuse_change();

ALTER TABLE public.provenance ENABLE ALWAYS TRIGGER provenance_append_only;

CREATE TRIGGER provenance_no_truncate BEFORE TRUNCATE ON public.provenance FOR EACH STATEMENT EXECUTE FUNCTION public.provenance_refuse_change();

ALTER TABLE public.provenance ENABLE ALWAYS TRIGGER provenance_no_truncate;

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(tenant_id);

ALTER TABLE public.provenance
    ADD CONSTRAINT provenance_tenant_id_fkey1 FOREIGN KEY (tenant_id) REFERENCES public.tenants(tenant_id);

ALTER TABLE ONLY public.spans
    ADD CONSTRAINT spans_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(tenant_id);

ALTER TABLE ONLY public.tenant_settings
    ADD CONSTRAINT tenant_settings_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(tenant_id);

ALTER TABLE ONLY public.tenant_settings
    ADD CONSTRAINT tenant_settings_text_hash_key_registered FOREIGN KEY (tenant_id, text_hash_key) REFERENCES public.tenant_text_keys(tenant_id, text_hash_key);

ALTER TABLE ONLY public.tenant_text_keys
    ADD CONSTRAINT tenant_text_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(tenant_id);

ALTER TABLE public.api_keys ENABLE ROW LEVEL SECURITY;

CREATE POLICY api_keys_tenant ON public.api_keys USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.audit_log ENABLE ROW LEVEL SECURITY;

CREATE POLICY audit_log_tenant ON public.audit_log USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.context_text ENABLE ROW LEVEL SECURITY;

CREATE POLICY context_text_tenant ON public.context_text USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK (((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)) AND public.lineage_captures(tenant_id, context_id)));

ALTER TABLE public.events ENABLE ROW LEVEL SECURITY;

CREATE POLICY events_pending ON public.events FOR SELECT TO postgres USING (true);

CREATE POLICY events_tenant ON public.events USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.forget_tombstones ENABLE ROW LEVEL SECURITY;

CREATE POLICY forget_tombstones_tenant ON public.forget_tombstones USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.invalidation_keys ENABLE ROW LEVEL SECURITY;

CREATE POLICY invalidation_keys_tenant ON public.invalidation_keys USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.invalidation_postings ENABLE ROW LEVEL SECURITY;

CREATE POLICY invalidation_postings_tenant ON public.invalidation_postings USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.log_checkpoints ENABLE ROW LEVEL SECURITY;

CREATE POLICY log_checkpoints_tenant ON public.log_checkpoints USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.log_heads ENABLE ROW LEVEL SECURITY;

CREATE POLICY log_heads_pending ON public.log_heads FOR SELECT TO postgres USING (true);

CREATE POLICY log_heads_tenant ON public.log_heads USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.log_leaves ENABLE ROW LEVEL SECURITY;

CREATE POLICY log_leaves_tenant ON public.log_leaves USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.log_nodes ENABLE ROW LEVEL SECURITY;

CREATE POLICY log_nodes_tenant ON public.log_nodes USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.provenance ENABLE ROW LEVEL SECURITY;

ALTER TABLE public.provenance_children ENABLE ROW LEVEL SECURITY;

CREATE POLICY provenance_children_tenant ON public.provenance_children USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

CREATE POLICY provenance_tenant ON public.provenance USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.spans ENABLE ROW LEVEL SECURITY;

CREATE POLICY spans_tenant ON public.spans USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.tenant_counters ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_counters_statistics ON public.tenant_counters FOR SELECT TO postgres USING (true);

CREATE POLICY tenant_counters_tenant ON public.tenant_counters USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.tenant_expiry ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_expiry_tenant ON public.tenant_expiry USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.tenant_settings ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_settings_tenant ON public.tenant_settings USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.tenant_text_keys ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_text_keys_tenant ON public.tenant_text_keys USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.tenants ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenants_retention ON public.tenants FOR SELECT TO postgres USING (true);

CREATE POLICY tenants_tenant ON public.tenants USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

ALTER TABLE public.transform_versions ENABLE ROW LEVEL SECURITY;

CREATE POLICY transform_versions_tenant ON public.transform_versions USING ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant))) WITH CHECK ((tenant_id = ( SELECT public.lineage_session_tenant() AS lineage_session_tenant)));

GRANT USAGE ON SCHEMA public TO lineage_app;

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_activity(pid integer, ...) FROM PUBLIC;

REVOKE ALL ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_add_partitions(p_from timestamp with time zone, p_through timestamp with time zone) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_analyze(p_table text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_analyze(p_table text) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_is_uuids boolean[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_keys text[], p_upstream_key_lists text[], p_upstream_depth_lists text[], p_root_source_lists text[], p_root_depth_lists text[], p_posting_keys integer[], p_posting_kinds text[], p_posting_depths integer[], p_posting_created_ats timestamp with time zone[], p_posting_uuid_lists text[], p_posting_id_lists text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_append(p_tenant text, p_token text, p_context_ids text[], p_is_uuids boolean[], p_parent_id_lists text[], p_kinds text[], p_source_uris text[], p_content_hashes text[], p_transforms text[], p_transform_versions text[], p_version_keys text[], p_produced_bys text[], p_index_snapshots text[], p_trace_ids text[], p_created_ats timestamp with time zone[], p_attribute_docs text[], p_key_ids text[], p_signatures bytea[], p_keys text[], p_upstream_key_lists text[], p_upstream_depth_lists text[], p_root_source_lists text[], p_root_depth_lists text[], p_posting_keys integer[], p_posting_kinds text[], p_posting_depths integer[], p_posting_created_ats timestamp with time zone[], p_posting_uuid_lists text[], p_posting_id_lists text[]) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_audit_append(p_tenant_id text, p_at timestamp with time zone, p_key_id text, p_action text, p_target text, p_detail jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_blast_radius(p_max_depth integer, p_context_ids text[], p_tenant_id text, p_kind text, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_blast_radius(p_max_depth integer, p_context_ids text[], p_tenant_id text, p_kind text, p_token text, p_audit jsonb) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_create_partition(p_parent text, p_name text, p_lower timestamp with time zone, p_upper timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_delete_tenant(p_tenant_id text) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_get_contexts(p_tenant_id text, p_context_ids text[], p_token text, p_audit jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_get_contexts(p_tenant_id text, p_context_ids text[], p_token text, p_audit jsonb) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_key(p_key_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_key(p_key_id text) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_key_revoke(p_key_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_key_revoke(p_key_id text) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_list_contexts(p_tenant_id text, p_kind text, p_source_uri text, p_trace_id text, p_produced_by text, p_session_id text, p_since timestamp with time zone, p_until timestamp with time zone, p_after_created_at timestamp with time zone, p_after_context_id text, p_page_size bigint, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_list_contexts(p_tenant_id text, p_kind text, p_source_uri text, p_trace_id text, p_produced_by text, p_session_id text, p_since timestamp with time zone, p_until timestamp with time zone, p_after_created_at timestamp with time zone, p_after_context_id text, p_page_size bigint, p_token text, p_audit jsonb) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_log_advance(p_tenant text, p_token text, p_old_size bigint, p_context_ids text[], p_created_ats timestamp with time zone[], p_levels smallint[], p_node_indexes bigint[], p_hashes bytea[], p_root_hash bytea) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_log_lock(p_tenant text, p_token text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_log_lock(p_tenant text, p_token text) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_open_partitions_check(p_now timestamp with time zone, p_add boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_open_partitions_validate() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_partitions(p_parent regclass) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_partitions_shape(p_now timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_postings_merge(p_tenant text, p_records integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_postings_merge(p_tenant text, p_records integer) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_postings_merge_keys(p_tenant text, p_keys integer[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_postings_merge_keys(p_tenant text, p_keys integer[]) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_postings_pending() FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_postings_pending() TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_read_begin(p_tenant_id text, p_token text, p_audit jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.lineage_retention_apply(p_now timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_retention_apply(p_now timestamp with time zone) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_statistics_analyzed() FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_statistics_analyzed() TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_statistics_due(p_from bigint, p_factor double precision) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_statistics_due(p_from bigint, p_factor double precision) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_statistics_tables() FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_statistics_tables() TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_tenant_vouched(p_tenant text, p_token text) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_trace_contexts(p_tenant_id text, p_trace_id text, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_trace_contexts(p_tenant_id text, p_trace_id text, p_token text, p_audit jsonb) TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_vouched_tenant() FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_vouched_tenant() TO lineage_app;

REVOKE ALL ON FUNCTION public.lineage_walk_back(p_context_id text, p_tenant_id text, p_max_depth integer, p_token text, p_audit jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.lineage_walk_back(p_context_id text, p_tenant_id text, p_max_depth integer, p_token text, p_audit jsonb) TO lineage_app;

REVOKE ALL ON FUNCTION public.log_pending_tenants() FROM PUBLIC;
GRANT ALL ON FUNCTION public.log_pending_tenants() TO lineage_app;

GRANT SELECT ON TABLE public.api_keys TO lineage_app;

REVOKE ALL ON TABLE public.audit_log FROM CURRENT_USER;
GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER ON TABLE public.audit_log TO CURRENT_USER;
GRANT SELECT,INSERT ON TABLE public.audit_log TO lineage_app;

GRANT SELECT,INSERT,DELETE ON TABLE public.context_text TO lineage_app;

GRANT SELECT ON TABLE public.events TO lineage_app;

GRANT SELECT ON TABLE public.forget_tombstones TO lineage_app;

GRANT SELECT ON TABLE public.invalidation_keys TO lineage_app;

GRANT SELECT ON TABLE public.invalidation_postings TO lineage_app;

REVOKE ALL ON TABLE public.invalidation_postings_p_open FROM CURRENT_USER;
GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER ON TABLE public.invalidation_postings_p_open TO CURRENT_USER;

GRANT SELECT,INSERT ON TABLE public.log_checkpoints TO lineage_app;

GRANT SELECT ON TABLE public.log_heads TO lineage_app;

GRANT SELECT ON TABLE public.log_leaves TO lineage_app;

GRANT SELECT ON TABLE public.log_nodes TO lineage_app;

REVOKE ALL ON TABLE public.provenance FROM CURRENT_USER;
GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER ON TABLE public.provenance TO CURRENT_USER;
GRANT SELECT ON TABLE public.provenance TO lineage_app;

GRANT SELECT ON TABLE public.provenance_children TO lineage_app;

REVOKE ALL ON TABLE public.provenance_children_p_open FROM CURRENT_USER;
GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER ON TABLE public.provenance_children_p_open TO CURRENT_USER;

REVOKE ALL ON TABLE public.provenance_p_open FROM CURRENT_USER;
GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER ON TABLE public.provenance_p_open TO CURRENT_USER;

GRANT SELECT,INSERT ON TABLE public.spans TO lineage_app;

GRANT SELECT,INSERT,UPDATE ON TABLE public.tenant_counters TO lineage_app;

GRANT SELECT ON TABLE public.tenant_expiry TO lineage_app;

GRANT SELECT,UPDATE ON TABLE public.tenant_settings TO lineage_app;

GRANT SELECT ON TABLE public.tenant_text_keys TO lineage_app;

GRANT SELECT ON TABLE public.tenants TO lineage_app;

GRANT SELECT ON TABLE public.transform_versions TO lineage_app;
