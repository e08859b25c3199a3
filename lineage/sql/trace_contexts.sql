-- name: trace_contexts
-- Every record of one trace, in the order they were recorded: the jump from a trace into
-- the graph. The table is named with its schema: lineage_trace_contexts runs this statement
-- as the owner with only pg_catalog on its path.
--   psql -v tenant_id=default -v trace_id=4bf92f3577b34da6a3ce929d0e0e4736 \
--        -f sql/trace_contexts.sql
SELECT r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash, r.transform,
       r.transform_version, r.produced_by, r.index_snapshot, r.trace_id, r.created_at,
       r.attributes
FROM public.provenance AS r
WHERE r.tenant_id = :'tenant_id' AND r.trace_id = :'trace_id'
ORDER BY r.created_at, r.context_id;
