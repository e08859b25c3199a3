-- name: list_contexts
-- Records matching every filter, oldest first, one page at a time (for audits). Text filters
-- take 'any' to match everything (kind also 'all': both include verdicts and tombstones);
-- session_id matches attributes.session_id (agent steps); since/until take '-infinity' and
-- 'infinity'. The next page
-- starts after the last row's (created_at, context_id): pass them as after_created_at and
-- after_context_id ('-infinity' and '' for the first page). The table is named with its
-- schema: lineage_list_contexts runs this statement as the owner with only pg_catalog on its
-- path.
--   psql -v tenant_id=default -v kind=answer -v source_uri=any -v trace_id=any \
--        -v produced_by=any -v session_id=any -v since=-infinity -v until=infinity \
--        -v after_created_at=-infinity -v after_context_id= -v page_size=100 \
--        -f sql/list_contexts.sql
SELECT r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes
FROM public.provenance AS r
WHERE r.tenant_id = :'tenant_id'
  AND (:'kind' IN ('any', 'all') OR r.kind = :'kind')
  AND (:'source_uri' = 'any' OR r.source_uri = :'source_uri')
  AND (:'trace_id' = 'any' OR r.trace_id = :'trace_id')
  AND (:'produced_by' = 'any' OR r.produced_by = :'produced_by')
  AND (:'session_id' = 'any' OR r.attributes ->> 'session_id' = :'session_id')
  -- The window [since, until) and the cursor, with one lower bound for the index range: the
  -- later of since and the cursor ((since, '') bounds as created_at >= since does: no id is
  -- empty). With two, the range began at the cursor's, and a first page since a late time
  -- read every earlier record of the tenant.
  AND :'since'::timestamptz < :'until'::timestamptz AND r.created_at < :'until'::timestamptz
  AND (r.created_at, r.context_id)
      > (greatest(:'after_created_at'::timestamptz, :'since'::timestamptz),
         CASE WHEN :'after_created_at'::timestamptz >= :'since'::timestamptz
              THEN :'after_context_id'::text ELSE '' END)
ORDER BY r.created_at, r.context_id
LIMIT :page_size;
